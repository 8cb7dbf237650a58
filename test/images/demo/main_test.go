package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestDemo(t *testing.T) {
	t.Setenv("VERSION", "v9")
	a := newApp()
	srv := httptest.NewServer(a.handler())
	defer srv.Close()

	for i, want := range []string{"visit #1\n", "visit #2\n"} {
		code, body := do(t, "GET", srv.URL+"/")
		if code != 200 || !strings.HasPrefix(body, "Hello from "+a.hostname+" (version v9), ") || !strings.HasSuffix(body, want) {
			t.Fatalf("GET / #%d = %d %q", i+1, code, body)
		}
	}
	if code, body := do(t, "GET", srv.URL+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz = %d %q", code, body)
	}
	if code, _ := do(t, "GET", srv.URL+"/fail-ready"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /fail-ready = %d, want 405", code)
	}
	if code, _ := do(t, "POST", srv.URL+"/fail-ready"); code != 200 {
		t.Fatalf("POST /fail-ready = %d", code)
	}
	if code, _ := do(t, "GET", srv.URL+"/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz after fail-ready = %d, want 503", code)
	}
	if code, _ := do(t, "POST", srv.URL+"/ready"); code != 200 {
		t.Fatalf("POST /ready = %d", code)
	}
	if code, body := do(t, "GET", srv.URL+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz after ready = %d %q", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/env"); code != 200 || !strings.Contains(body, "VERSION=v9") {
		t.Fatalf("env = %d %q", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/hog?mb=2"); code != 200 || body != "holding 2 MB\n" {
		t.Fatalf("hog = %d %q", code, body)
	}
	if code, _ := do(t, "GET", srv.URL+"/nope"); code != 404 {
		t.Fatalf("GET /nope = %d, want 404", code)
	}

	exited := -1
	exit = func(c int) { exited = c }
	defer func() { exit = os.Exit }()
	if code, _ := do(t, "GET", srv.URL+"/crash"); code != 200 || exited != 1 {
		t.Fatalf("crash = %d, exit code %d", code, exited)
	}
	// The visit counter only counts "/".
	if _, body := do(t, "GET", srv.URL+"/"); !strings.HasSuffix(body, "visit #3\n") {
		t.Fatalf("third visit = %q", body)
	}
}
