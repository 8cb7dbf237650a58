package apiserver

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
)

// Validating webhooks run in parallel and each may warn: the recorder
// takes them concurrently, each text once, as upstream's Warning headers.
func TestHeaderWarningsConcurrent(t *testing.T) {
	rec := httptest.NewRecorder()
	h := &headerWarnings{w: rec}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h.AddWarning("", fmt.Sprintf("warning %d", i%5))
			h.AddWarning("", "")
		}(i)
	}
	wg.Wait()
	if got := rec.Header().Values("Warning"); len(got) != 5 {
		t.Errorf("Warning headers %q, want 5 distinct", got)
	}
	h.AddWarning("", `say "hi"`)
	if got := rec.Header().Values("Warning"); got[len(got)-1] != `299 - "say \"hi\""` {
		t.Errorf("last header %q", got[len(got)-1])
	}
}
