package resident

import (
	"strconv"
	"strings"
	"testing"
)

// Trim drops the executable's resident pages, and the process goes on
// working: code and read-only data fault back in as they are used.
func TestTrimDropsExecutablePages(t *testing.T) {
	fileBefore := statusBytes("RssFile")
	before, after, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	fileAfter := statusBytes("RssFile")
	if before <= 0 || after >= before || fileAfter >= fileBefore {
		t.Errorf("RSS %d → %d, RssFile %d → %d: nothing was given back", before, after, fileBefore, fileAfter)
	}
	// Code, rodata (the strings and tables below) and the heap still work.
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(strconv.Itoa(i))
	}
	if got := len(sb.String()); got != 2890 {
		t.Errorf("after Trim, building a string gave %d bytes, want 2890", got)
	}
	if _, _, err := Trim(); err != nil {
		t.Errorf("a second Trim: %v", err)
	}
}
