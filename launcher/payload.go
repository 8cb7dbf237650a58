//go:build kelp_payload

package main

import (
	_ "embed"
)

// The core, zstd-compressed, and "<sha256 hex> <size>" of it
// uncompressed. scripts/build.sh supplies both files through -overlay:
// they are never in the source tree.
var (
	//go:embed kelp-core.zst
	payload []byte
	//go:embed kelp-core.sum
	payloadSum string
)
