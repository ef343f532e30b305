package imagebuild

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"strings"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

// noAssertion is SPDX's "not known" for a field that must be present.
const noAssertion = "NOASSERTION"

// sbom is the SPDX 2.3 document of the image res: the image, one package
// per platform's binary (CONTAINS), and under each binary the Go toolchain's
// standard library and every module the binary's build info lists, the
// main module with the image's version (DEPENDS_ON). Everything in it
// comes from the inputs, so the same build gives the same bytes.
func (o resolved) sbom(bins [][]byte, res Result) ([]byte, error) {
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      o.ref,
		DocumentNamespace: Source + "/spdx/" + strings.ReplaceAll(res.Digest, ":", "-"),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "dnsconfigurer-hack-build-image"}},
			Created:  o.Time.UTC().Format("2006-01-02T15:04:05Z"),
		},
	}
	imageID := common.ElementID("Image")
	doc.Packages = append(doc.Packages, &spdx.Package{
		PackageName: o.ref, PackageSPDXIdentifier: imageID, PackageVersion: o.Version,
		PackageDownloadLocation: noAssertion, PackageLicenseConcluded: noAssertion, PackageCopyrightText: noAssertion,
		PackageChecksums:          []common.Checksum{{Algorithm: common.SHA256, Value: strings.TrimPrefix(res.Digest, "sha256:")}},
		PackageExternalReferences: []*spdx.PackageExternalReference{purl("pkg:oci/" + repoName(o) + "@" + strings.ReplaceAll(res.Digest, ":", "%3A"))},
	})
	relate := func(a, b common.ElementID, kind string) {
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(a)), RefB: common.MakeDocElementID("", string(b)), Relationship: kind,
		})
	}
	relate("DOCUMENT", imageID, "DESCRIBES")
	for i, arch := range o.arches {
		bi, err := buildinfo.Read(bytes.NewReader(bins[i]))
		if err != nil {
			return nil, fmt.Errorf("sbom: build info of the linux/%s binary: %w", arch, err)
		}
		sum := sha256.Sum256(bins[i])
		binID := common.ElementID("Binary-linux-" + arch)
		doc.Packages = append(doc.Packages, &spdx.Package{
			PackageName: "dnsconfigurer (linux/" + arch + ")", PackageSPDXIdentifier: binID, PackageVersion: o.Version,
			PackageFileName:         BinaryPath,
			PackageDownloadLocation: noAssertion, PackageLicenseConcluded: noAssertion, PackageCopyrightText: noAssertion,
			PackageChecksums: []common.Checksum{{Algorithm: common.SHA256, Value: hex.EncodeToString(sum[:])}},
		})
		relate(imageID, binID, "CONTAINS")
		mods := []goModule{{bi.Path, o.Version, ""}, {"stdlib", bi.GoVersion, ""}}
		if bi.Main.Path != "" {
			mods[0].path = bi.Main.Path
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			mods = append(mods, goModule{d.Path, d.Version, d.Sum})
		}
		for j, m := range mods {
			id := common.ElementID(fmt.Sprintf("Module-linux-%s-%d", arch, j))
			p := &spdx.Package{
				PackageName: m.path, PackageSPDXIdentifier: id, PackageVersion: m.version,
				PackageDownloadLocation: noAssertion, PackageLicenseConcluded: noAssertion, PackageCopyrightText: noAssertion,
				PackageExternalReferences: []*spdx.PackageExternalReference{purl("pkg:golang/" + m.path + "@" + m.version)},
			}
			if m.sum != "" {
				p.PackageComment = "go.sum " + m.sum
			}
			doc.Packages = append(doc.Packages, p)
			relate(binID, id, "DEPENDS_ON")
		}
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return buf.Bytes(), nil
}

// goModule is one Go module of a binary: its path, version and go.sum hash.
type goModule struct{ path, version, sum string }

// purl is a package URL reference.
func purl(locator string) *spdx.PackageExternalReference {
	return &spdx.PackageExternalReference{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: locator}
}

// repoName is the image's repository without registry and tag, as a
// package URL names an OCI image.
func repoName(o resolved) string {
	r := o.tag.RepositoryStr()
	return r[strings.LastIndex(r, "/")+1:]
}
