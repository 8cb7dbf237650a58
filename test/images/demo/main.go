// Command demo is the small HTTP app the kelp test images carry
// (docker.io/kelp/demo:v1 and :v2). It is built static (CGO_ENABLED=0) and
// has knobs for the behaviours the end-to-end tests need: readiness that can
// be switched off, a crash endpoint, memory hogging, a timed exit for
// CrashLoopBackOff and graceful shutdown on SIGTERM.
//
// Routes:
//
//	/            "Hello from <hostname> (version <VERSION>), visit #<n>"
//	/healthz     200 "ok", or 503 after POST /fail-ready (until POST /ready)
//	/fail-ready  POST: make /healthz fail
//	/ready       POST: make /healthz succeed again
//	/crash       exit the process with code 1
//	/hog?mb=N    allocate, touch and keep N MB
//	/env         dump the environment
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// exit is replaced in tests so /crash does not end the test binary.
var exit = os.Exit

type app struct {
	hostname string
	version  string
	visits   atomic.Int64
	notReady atomic.Bool

	mu  sync.Mutex
	hog [][]byte
}

func newApp() *app {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	version := os.Getenv("VERSION")
	if version == "" {
		version = "v1"
	}
	return &app{hostname: host, version: version}
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", a.hello)
	mux.HandleFunc("/healthz", a.healthz)
	mux.HandleFunc("/fail-ready", a.setReady(false))
	mux.HandleFunc("/ready", a.setReady(true))
	mux.HandleFunc("/crash", a.crash)
	mux.HandleFunc("/hog", a.hogMemory)
	mux.HandleFunc("/env", a.env)
	return logRequests(mux)
}

func (a *app) hello(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	n := a.visits.Add(1)
	fmt.Fprintf(w, "Hello from %s (version %s), visit #%d\n", a.hostname, a.version, n)
}

func (a *app) healthz(w http.ResponseWriter, r *http.Request) {
	if a.notReady.Load() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprint(w, "ok")
}

func (a *app) setReady(ready bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		a.notReady.Store(!ready)
		fmt.Fprintf(w, "ready=%v\n", ready)
	}
}

func (a *app) crash(w http.ResponseWriter, r *http.Request) {
	log.Print("crash requested, exiting with code 1")
	fmt.Fprintln(w, "crashing")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	exit(1)
}

func (a *app) hogMemory(w http.ResponseWriter, r *http.Request) {
	mb, err := strconv.Atoi(r.URL.Query().Get("mb"))
	if err != nil || mb <= 0 {
		http.Error(w, "want ?mb=N with N > 0", http.StatusBadRequest)
		return
	}
	buf := make([]byte, mb<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // touch every page so it is really resident
	}
	a.mu.Lock()
	a.hog = append(a.hog, buf)
	total := 0
	for _, b := range a.hog {
		total += len(b)
	}
	a.mu.Unlock()
	fmt.Fprintf(w, "holding %d MB\n", total>>20)
}

func (a *app) env(w http.ResponseWriter, r *http.Request) {
	vars := os.Environ()
	sort.Strings(vars)
	for _, v := range vars {
		fmt.Fprintln(w, v)
	}
}

// logRequests logs one line per request to stdout.
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		log.Printf("%s %s %s %s", r.RemoteAddr, r.Method, r.URL.RequestURI(), time.Since(start).Round(time.Microsecond))
	})
}

func main() {
	log.SetOutput(os.Stdout)
	defPort := os.Getenv("PORT")
	if defPort == "" {
		defPort = "8000"
	}
	var defExit time.Duration
	if s := os.Getenv("EXIT_AFTER"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			log.Fatalf("bad EXIT_AFTER %q: %v", s, err)
		}
		defExit = d
	}
	port := flag.String("port", defPort, "port (or host:port) to listen on")
	exitAfter := flag.Duration("exit-after", defExit, "exit with code 1 after this long (0: never)")
	flag.Parse()

	addr := *port
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = ":" + addr
	}
	a := newApp()
	srv := &http.Server{Addr: addr, Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}

	if *exitAfter > 0 {
		time.AfterFunc(*exitAfter, func() {
			log.Printf("exit-after %s elapsed, exiting with code 1", *exitAfter)
			exit(1)
		})
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		sig := <-sigs
		if sig == syscall.SIGTERM {
			log.Print("received SIGTERM, shutting down")
		} else {
			log.Printf("received %s, shutting down", sig)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Printf("shutdown: %v", err)
		}
		close(done)
	}()

	log.Printf("demo %s on %s listening on %s", a.version, a.hostname, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("listen: %v", err)
	}
	<-done
	log.Print("bye")
}
