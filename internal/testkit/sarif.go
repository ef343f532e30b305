package testkit

import (
	"bytes"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sarifSchemaURL is the OASIS SARIF 2.1.0 schema's id (errata01).
const sarifSchemaURL = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

// SARIFSchema compiles the SARIF 2.1.0 schema from its copy at path
// (cmd/dnsconfigurer/testdata/lint/sarif-schema-2.1.0.json), formats
// asserted.
func SARIFSchema(t testing.TB, path string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(sarifSchemaURL, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(sarifSchemaURL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CheckSARIF fails the test unless out is JSON that schema accepts.
func CheckSARIF(t testing.TB, schema *jsonschema.Schema, out []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("SARIF output is not JSON: %v\n%s", err, out)
	}
	if err := schema.Validate(v); err != nil {
		t.Errorf("SARIF output does not match the SARIF 2.1.0 schema: %v", err)
	}
}
