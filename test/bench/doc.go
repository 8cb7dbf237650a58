// Package bench holds performance benchmarks of a real `kelp server`
// process, driven through the HTTP API with client-go:
//
//   - BenchmarkConfigMaps: create, get and list latency (p50/p99);
//   - BenchmarkConfigMapCreateRBAC: create latency of a user allowed by
//     RBAC (among 1,000 RoleBindings) against the admin's, side by side;
//   - BenchmarkWatchDelivery: time from an update being sent to an
//     informer's handler seeing it (p50/p99);
//   - BenchmarkStartup: cold start (fresh data dir) and warm restart
//     (existing data dir) to /readyz;
//   - BenchmarkIdleRSS: VmRSS of the server 30 s after it became ready;
//   - BenchmarkCustomObjectCreate: custom-object create p99 (a CRD with a
//     schema, defaults and CEL rules) against ConfigMap create p99, side
//     by side on one server;
//   - BenchmarkCRDIdleRSS: idle VmRSS of a server with 100 CRDs against
//     one with none, both idle over the same window;
//   - BenchmarkJob1000: a Job of 1,000 completions at parallelism 100 on
//     simulated kubelets, from create to Complete;
//   - BenchmarkStatefulSet10SimulatedPods: a StatefulSet scaled 0 → 10 on
//     simulated kubelets until all are Ready, OrderedReady and Parallel;
//   - BenchmarkStatefulSetRealPods: the same with real busybox pods on the
//     node agent, and OrderedReady with a local-path volume per pod.
//
// Plain `go test` runs only the unit tests of the statistics helpers. Run
// the benchmarks with scripts/bench.sh (or `make bench`), or
//
//	go test -run '^$' -bench . -benchtime=1x ./test/bench/
//
// Each benchmark does a fixed workload once per b.N iteration, so
// -benchtime=1x is the intended setting. KELP_BIN names the binary to
// measure; without it the benchmarks run `make build` first. Either way the
// binary is copied to a temporary directory (as "kbench") before it is
// started, because a freshly linked binary shows a higher RSS.
//
// Every result also reports "other-cores": how many cores other processes
// kept busy meanwhile. On a shared 2-core machine a concurrent build or
// test run inflates the latencies; rerun when it is well above zero.
// KELP_BENCH_PERF=DIR records a `perf record -g` profile of the server for
// each benchmark into DIR.
package bench
