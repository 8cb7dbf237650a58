package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/version"
)

// Version is what /version reports; kubectl compares its minor version.
var Version = version.Info{
	Major: "1", Minor: "37", GitVersion: "v1.37.2+kelp", GitCommit: "", GitTreeState: "clean",
	BuildDate: "", GoVersion: "", Compiler: "gc", Platform: "linux/amd64",
}

func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", mediaJSON)
	_ = json.NewEncoder(w).Encode(Version)
}

// checks are the named health checks; readyz adds the bootstrap check.
func (s *Server) checks(ready bool) []struct {
	name string
	run  func(context.Context) error
} {
	out := []struct {
		name string
		run  func(context.Context) error
	}{
		{"ping", func(context.Context) error { return nil }},
		{"etcd", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := s.cfg.Etcd.Get(ctx, "health", nil...)
			return err
		}},
	}
	if ready {
		out = append(out, struct {
			name string
			run  func(context.Context) error
		}{"bootstrap", func(context.Context) error {
			if v, ok := s.ready.Load("bootstrap"); !ok || v != nil {
				return fmt.Errorf("not finished")
			}
			return nil
		}})
	}
	return out
}

// serveHealth answers /healthz, /livez and /readyz, with ?verbose listing
// each check and /<endpoint>/<check> running one, as upstream.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	endpoint := parts[0]
	only := ""
	if len(parts) > 1 {
		only = parts[1]
	}
	_, verbose := r.URL.Query()["verbose"]
	var b strings.Builder
	failed := false
	found := only == ""
	for _, c := range s.checks(endpoint == "readyz") {
		if only != "" && c.name != only {
			continue
		}
		found = true
		if err := c.run(r.Context()); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", c.name)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !found {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "404 page not found\n")
		return
	}
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s%s check failed\n", b.String(), endpoint)
		return
	}
	if verbose {
		fmt.Fprintf(w, "%s%s check passed\n", b.String(), endpoint)
		return
	}
	fmt.Fprint(w, "ok")
}
