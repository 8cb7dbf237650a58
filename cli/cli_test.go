package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	agentjoin "github.com/kelp-project/kelp/agent/join"
	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/join"

	urfave "github.com/urfave/cli/v2"
	"k8s.io/component-base/version"

	"github.com/kelp-project/kelp/agent"
	"github.com/kelp-project/kelp/server"
	"github.com/kelp-project/kelp/server/apiserver"
	"github.com/kelp-project/kelp/server/controllers/nodelifecycle"
	"github.com/kelp-project/kelp/server/controllers/podgc"
	"github.com/kelp-project/kelp/server/scheduler"
)

// The expected values below are literals, not package config's constants:
// they are the defaults kelp had before the flags moved to this package,
// and a change to any of them is a change of behaviour.

var wantNodeLifecycle = nodelifecycle.Config{
	NodeMonitorPeriod:         5 * time.Second,
	NodeMonitorGracePeriod:    50 * time.Second,
	NodeStartupGracePeriod:    60 * time.Second,
	NodeEvictionRate:          0.1,
	SecondaryNodeEvictionRate: 0.01,
	LargeClusterSizeThreshold: 50,
	UnhealthyZoneThreshold:    0.55,
}

var wantServer = server.Config{
	DataDir:                             "/var/lib/kelp",
	BindAddress:                         "0.0.0.0",
	HTTPSPort:                           6443,
	WriteKubeconfig:                     "/etc/kelp/kelp.yaml",
	KubeconfigMode:                      0o600,
	ClusterCIDR:                         "10.42.0.0/16",
	ServiceCIDR:                         "10.43.0.0/16",
	ServiceNodePorts:                    "30000-32767",
	ClusterDNS:                          "10.43.0.10",
	ClusterDomain:                       "cluster.local",
	NodeNetwork:                         "vxlan",
	CompactionInterval:                  5 * time.Minute,
	MaxRequestsInFlight:                 400,
	MaxMutatingRequestsInFlight:         200,
	IdleConnectionTimeout:               90 * time.Second,
	TLSHandshakeTimeout:                 10 * time.Second,
	MaxConnectionsPerIP:                 1024,
	MaxConnections:                      2048,
	DefaultNotReadyTolerationSeconds:    300,
	DefaultUnreachableTolerationSeconds: 300,
	NodeLifecycle:                       wantNodeLifecycle,
	SchedulerBackoff:                    scheduler.Backoff{Initial: time.Second, Max: 10 * time.Second},
	PodGC:                               podgc.Config{TerminatedPodThreshold: 12500, Quarantine: 40 * time.Second},
	StorageMinFree:                      apiserver.MinFree{Percent: 5, Bytes: 256 << 20},
}

// wantAgent are the agent's own flags' defaults, as every command that
// takes them parses them.
var wantAgent = agent.Config{
	Version:             version.Get().GitVersion,
	RunDir:              "/run/kelp",
	LogRoot:             "/var/log/pods",
	CgroupRoot:          "/kubepods",
	CgroupDriver:        "auto",
	PodPidsLimit:        -1,
	KubeletPort:         10250,
	DNSPort:             53,
	CrashLoopMaxBackoff: 5 * time.Minute,
	NodeNetwork:         "vxlan",
}

// clearEnv unsets every KELP_ variable for the test, so defaults are
// defaults.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "KELP_") {
			t.Setenv(k, "") // restores it after the test
			os.Unsetenv(k)
		}
	}
}

// run runs cmd as `kelp <cmd> args...` and returns its output.
func run(t *testing.T, cmd *urfave.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &urfave.App{Name: "kelp", Flags: GlobalFlags(), Commands: []*urfave.Command{cmd},
		Writer: &out, ErrWriter: &out, ExitErrHandler: func(*urfave.Context, error) {}}
	err := app.Run(append([]string{"kelp", cmd.Name}, args...))
	return out.String(), err
}

func parseServer(t *testing.T, args ...string) (server.Config, *serverOptions) {
	t.Helper()
	var got *serverOptions
	if out, err := run(t, serverCommand(func(_ context.Context, o *serverOptions) error { got = o; return nil }), args...); err != nil {
		t.Fatalf("kelp server %v: %v\n%s", args, err, out)
	}
	cfg, err := got.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, got
}

func parseAgent(t *testing.T, args ...string) *agentOptions {
	t.Helper()
	var got *agentOptions
	if out, err := run(t, agentCommand(func(_ context.Context, o *agentOptions) error { got = o; return nil }), args...); err != nil {
		t.Fatalf("kelp agent %v: %v\n%s", args, err, out)
	}
	return got
}

func parseKillAll(t *testing.T, args ...string) agent.Config {
	t.Helper()
	var got agent.Config
	if out, err := run(t, killallCommand(func(_ context.Context, c agent.Config) error { got = c; return nil }), args...); err != nil {
		t.Fatalf("kelp killall %v: %v\n%s", args, err, out)
	}
	return got
}

func TestServerDefaults(t *testing.T) {
	clearEnv(t)
	cfg, o := parseServer(t)
	if !reflect.DeepEqual(cfg, wantServer) {
		t.Errorf("server config\n got %+v\nwant %+v", cfg, wantServer)
	}
	if o.agent != wantAgent {
		t.Errorf("local agent config\n got %+v\nwant %+v", o.agent, wantAgent)
	}
	if o.debug || o.disableAgent {
		t.Errorf("debug %v, disable-agent %v", o.debug, o.disableAgent)
	}
	// The controllers' own defaults are the same values (both come from
	// package config).
	if got := nodelifecycle.DefaultConfig(); got != wantNodeLifecycle {
		t.Errorf("nodelifecycle.DefaultConfig() = %+v", got)
	}
	if scheduler.DefaultBackoff != wantServer.SchedulerBackoff {
		t.Errorf("scheduler.DefaultBackoff = %+v", scheduler.DefaultBackoff)
	}
}

func TestAgentDefaults(t *testing.T) {
	clearEnv(t)
	o := parseAgent(t, "--kubeconfig", "/k")
	want := wantAgent
	want.DataDir, want.ClusterCIDR, want.ClusterDNS, want.ClusterDomain = "/var/lib/kelp", "10.42.0.0/16", "10.43.0.10", "cluster.local"
	if o.agent != want {
		t.Errorf("agent config\n got %+v\nwant %+v", o.agent, want)
	}
	if o.kubeconfig != "/k" {
		t.Errorf("kubeconfig %q", o.kubeconfig)
	}
	// The agent needs one way to reach the server: a kubeconfig, or a
	// server and a token to join with.
	for _, c := range []struct {
		o    agentOptions
		want string
	}{
		{agentOptions{}, "no server to join"},
		{agentOptions{server: "https://s:6443"}, "without --token"},
		{agentOptions{token: "t"}, "without --server"},
		{agentOptions{kubeconfig: "/k", server: "https://s:6443", token: "t"}, "choose one"},
		{agentOptions{token: "t", tokenFile: "/f"}, "both given"},
	} {
		if err := c.o.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
	for _, o := range []agentOptions{{kubeconfig: "/k"}, {server: "https://s:6443", token: "t"}} {
		if err := o.validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestTokenFlags(t *testing.T) {
	clearEnv(t)
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := parseServer(t, "--token", "s3cret", "--agent-token-file", f)
	if cfg.Token != "s3cret" || cfg.AgentToken != "from-file" {
		t.Errorf("server tokens %q %q", cfg.Token, cfg.AgentToken)
	}
	var got *serverOptions
	if _, err := run(t, serverCommand(func(_ context.Context, o *serverOptions) error { got = o; return nil }), "--token", "a", "--token-file", f); err != nil {
		t.Fatal(err)
	}
	if _, err := got.serverConfig(); err == nil || !strings.Contains(err.Error(), "both given") {
		t.Errorf("--token and --token-file: %v", err)
	}
	t.Setenv("KELP_URL", "https://s:6443")
	t.Setenv("KELP_TOKEN_FILE", f)
	a := parseAgent(t)
	if err := a.validate(); err != nil || a.server != "https://s:6443" || a.token != "from-file" {
		t.Errorf("agent from KELP_URL, KELP_TOKEN_FILE: %q %q %v", a.server, a.token, err)
	}
}

func TestKillAllDefaults(t *testing.T) {
	clearEnv(t)
	want := wantAgent
	want.DataDir, want.ClusterCIDR = "/var/lib/kelp", "10.42.0.0/16"
	if got := parseKillAll(t); got != want {
		t.Errorf("killall config\n got %+v\nwant %+v", got, want)
	}
}

func TestFlagsAndAliases(t *testing.T) {
	clearEnv(t)
	cfg, o := parseServer(t, "-d", "/data", "-o", "/kc", "--write-kubeconfig-mode", "0644", "--https-listen-port", "0",
		"--node-ip", "192.0.2.1", "--disable-agent", "--run-dir", "/run/x", "--node-monitor-period", "1s", "--pod-max-backoff", "2s")
	if cfg.DataDir != "/data" || cfg.WriteKubeconfig != "/kc" || cfg.KubeconfigMode != 0o644 || cfg.HTTPSPort != 0 {
		t.Errorf("server config %+v", cfg)
	}
	if cfg.NodeLifecycle.NodeMonitorPeriod != time.Second || cfg.SchedulerBackoff.Max != 2*time.Second {
		t.Errorf("timings %+v %+v", cfg.NodeLifecycle, cfg.SchedulerBackoff)
	}
	if o.agent.NodeIP != "192.0.2.1" || o.agent.RunDir != "/run/x" || !o.disableAgent {
		t.Errorf("agent %+v, disable-agent %v", o.agent, o.disableAgent)
	}
	if ac := parseAgent(t, "--kubeconfig", "/k", "-d", "/data"); ac.agent.DataDir != "/data" {
		t.Errorf("agent -d: %q", ac.agent.DataDir)
	}
	if ac := parseKillAll(t, "-d", "/data"); ac.DataDir != "/data" {
		t.Errorf("killall -d: %q", ac.DataDir)
	}
}

func TestBadKubeconfigMode(t *testing.T) {
	clearEnv(t)
	var got *serverOptions
	if _, err := run(t, serverCommand(func(_ context.Context, o *serverOptions) error { got = o; return nil }), "--write-kubeconfig-mode", "rw"); err != nil {
		t.Fatal(err)
	}
	if _, err := got.serverConfig(); err == nil || !strings.Contains(err.Error(), "--write-kubeconfig-mode") {
		t.Errorf("error %v", err)
	}
}

// allFlags are the flags of every command and kelp's own.
func allFlags() map[string][]urfave.Flag {
	all := map[string][]urfave.Flag{"kelp": GlobalFlags(), "server": Server().Flags, "agent": Agent().Flags, "killall": KillAll().Flags, "kubeconfig": Kubeconfig().Flags}
	for _, sub := range Token().Subcommands {
		all["token "+sub.Name] = sub.Flags
	}
	return all
}

// envExceptions are the flags whose variable k3s names otherwise: its
// agent's --server reads K3S_URL.
var envExceptions = map[string]string{"server": "KELP_URL"}

func TestEnvVars(t *testing.T) {
	for cmd, flags := range allFlags() {
		for _, f := range flags {
			name := f.Names()[0]
			want := "KELP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			if e, ok := envExceptions[name]; ok {
				want = e
			}
			envs := f.(interface{ GetEnvVars() []string }).GetEnvVars()
			if len(envs) != 1 || envs[0] != want {
				t.Errorf("%s --%s: env %v, want [%s]", cmd, name, envs, want)
			}
		}
	}

	clearEnv(t)
	for k, v := range map[string]string{
		"KELP_DATA_DIR": "/e/data", "KELP_CLUSTER_CIDR": "10.99.0.0/16", "KELP_DISABLE_AGENT": "true",
		"KELP_NODE_MONITOR_PERIOD": "2s", "KELP_RUN_DIR": "/e/run", "KELP_KUBECONFIG": "/e/kc", "KELP_DEBUG": "true",
	} {
		t.Setenv(k, v)
	}
	cfg, o := parseServer(t)
	if cfg.DataDir != "/e/data" || cfg.ClusterCIDR != "10.99.0.0/16" || !o.disableAgent || !o.debug ||
		cfg.NodeLifecycle.NodeMonitorPeriod != 2*time.Second || o.agent.RunDir != "/e/run" {
		t.Errorf("server from env: %+v, %+v", cfg, o)
	}
	if a := parseAgent(t); a.kubeconfig != "/e/kc" || a.agent.DataDir != "/e/data" || a.agent.ClusterCIDR != "10.99.0.0/16" {
		t.Errorf("agent from env: %+v", a)
	}
	if k := parseKillAll(t); k.DataDir != "/e/data" || k.ClusterCIDR != "10.99.0.0/16" || k.RunDir != "/e/run" {
		t.Errorf("killall from env: %+v", k)
	}
	// A flag beats its environment variable.
	if cfg, _ := parseServer(t, "--data-dir", "/f"); cfg.DataDir != "/f" {
		t.Errorf("flag over env: %q", cfg.DataDir)
	}
}

// TestHelp holds each command's help, flag names, aliases, defaults and
// environment variables included, to what it was (testdata, from the
// kelp binary before the flags moved here).
func TestHelp(t *testing.T) {
	clearEnv(t)
	for _, cmd := range []*urfave.Command{Server(), Agent(), KillAll(), Token(), Kubeconfig(), SecretsEncrypt()} {
		out, err := run(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", cmd.Name+"-help.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("kelp %s --help:\n%s\nwant:\n%s", cmd.Name, out, want)
		}
	}
}

func TestLocalAgent(t *testing.T) {
	cfg := wantServer
	cfg.DataDir, cfg.ClusterCIDR = "/data", "10.99.0.0/16"
	s := &server.Server{NodeName: "node-a", AdvertiseAddress: "192.0.2.1"}
	ac := localAgent(wantAgent, cfg, s)
	if ac.DataDir != "/data" || ac.NodeName != "node-a" || ac.NodeIP != "192.0.2.1" ||
		ac.ClusterCIDR != "10.99.0.0/16" || ac.ClusterDNS != "10.43.0.10" || ac.ClusterDomain != "cluster.local" || ac.RunDir != "/run/kelp" {
		t.Errorf("local agent %+v", ac)
	}
	withIP := wantAgent
	withIP.NodeIP = "192.0.2.9"
	if ac := localAgent(withIP, cfg, s); ac.NodeIP != "192.0.2.9" {
		t.Errorf("--node-ip replaced by the advertise address: %q", ac.NodeIP)
	}
}

// TestJoinedTakesTheServersSettings: an agent joining repeats none of the
// server's network flags; the server's values replace the agent's.
func TestJoinedTakesTheServersSettings(t *testing.T) {
	ac := wantAgent
	ac.ClusterCIDR, ac.ClusterDNS, ac.ClusterDomain = "10.99.0.0/16", config.ClusterDNS, config.ClusterDomain
	res := &agentjoin.Result{Settings: join.Settings{ClusterCIDR: "10.42.0.0/16", ClusterDNS: "10.43.0.20", ClusterDomain: "example.local", FlannelBackend: "host-gw"},
		ServingCertFile: "/c.crt", ServingKeyFile: "/c.key"}
	joined(&ac, res)
	if ac.ClusterCIDR != "10.42.0.0/16" || ac.ClusterDNS != "10.43.0.20" || ac.ClusterDomain != "example.local" || ac.NodeNetwork != "host-gw" ||
		ac.KubeletServingCertFile != "/c.crt" || ac.KubeletServingKeyFile != "/c.key" {
		t.Errorf("after join: %+v", ac)
	}
}

// A wrong --flannel-backend stops the server before it starts, agent or
// not: joining agents would all be told that name.
func TestServerRefusesUnknownBackend(t *testing.T) {
	var got *serverOptions
	if _, err := run(t, serverCommand(func(_ context.Context, o *serverOptions) error { got = o; return nil }), "--flannel-backend", "bogus", "--disable-agent"); err != nil {
		t.Fatal(err)
	}
	if _, err := got.serverConfig(); err == nil || !strings.Contains(err.Error(), "--flannel-backend") || !strings.Contains(err.Error(), "vxlan") {
		t.Errorf("serverConfig with --flannel-backend bogus: %v, want an error naming the flag and the known backends", err)
	}
}

func TestStorageMinFreeFlag(t *testing.T) {
	clearEnv(t)
	for arg, want := range map[string]apiserver.MinFree{"10%": {Percent: 10}, "1Gi": {Bytes: 1 << 30}, "0": {}, "2%,100Mi": {Percent: 2, Bytes: 100 << 20}} {
		var got *serverOptions
		if _, err := run(t, serverCommand(func(_ context.Context, o *serverOptions) error { got = o; return nil }), "--storage-min-free", arg); err != nil {
			t.Fatal(err)
		}
		cfg, err := got.serverConfig()
		if err != nil || cfg.StorageMinFree != want {
			t.Errorf("--storage-min-free %s: %+v, %v; want %+v", arg, cfg.StorageMinFree, err, want)
		}
	}
	var got *serverOptions
	if _, err := run(t, serverCommand(func(_ context.Context, o *serverOptions) error { got = o; return nil }), "--storage-min-free", "lots"); err != nil {
		t.Fatal(err)
	}
	if _, err := got.serverConfig(); err == nil || !strings.Contains(err.Error(), "--storage-min-free") {
		t.Errorf("--storage-min-free lots: %v", err)
	}
}

// --disable takes k3s's forms: repeated, comma-separated, or from
// KELP_DISABLE.
func TestServerDisable(t *testing.T) {
	clearEnv(t)
	cfg, _ := parseServer(t, "--disable", "local-storage", "--disable", "coredns, traefik")
	if want := []string{"local-storage", "coredns", "traefik"}; !reflect.DeepEqual(cfg.Disable, want) {
		t.Errorf("--disable: %q, want %q", cfg.Disable, want)
	}
	t.Setenv("KELP_DISABLE", "local-storage,servicelb")
	cfg, _ = parseServer(t)
	if want := []string{"local-storage", "servicelb"}; !reflect.DeepEqual(cfg.Disable, want) {
		t.Errorf("KELP_DISABLE: %q, want %q", cfg.Disable, want)
	}
}
