//go:build !kelp_payload

package main

// Built without the kelp_payload tag (go build ./..., go vet): no core
// inside; $KELP_CORE may name one to run.
var (
	payload    []byte
	payloadSum string
)
