// Command genschema writes v1alpha1.ServerSchema to the file its argument
// names: `go generate ./api/v1alpha1` keeps the chart's copy.
package main

import (
	"fmt"
	"os"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschema FILE")
		os.Exit(2)
	}
	b, err := v1alpha1.ServerSchema()
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
}
