// Command build-images writes the kelp test images (OCI archives) into a
// directory, default bin/images, and prints their paths. Copy them into a
// node's <data-dir>/agent/images/ to make them available without a registry.
package main

import (
	"fmt"
	"os"

	"github.com/kelp-project/kelp/test/images"
)

func main() {
	dir := "bin/images"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	paths, err := images.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println(p)
	}
}
