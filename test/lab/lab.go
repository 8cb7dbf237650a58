// Package lab drives scripts/lab.sh for the end-to-end tests and the
// benchmarks: a cluster of N nodes on this machine, each a network
// namespace on the lab bridge, node-1 running `kelp server` and the
// others `kelp agent --server ... --token ...`. The script is the one a
// user runs; this package only calls it and reads what it leaves (the
// kubeconfig, the node logs, the nodes' credentials).
package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kelp-project/kelp/netplane/bridge"
)

// Options are what lab.sh reads from its environment.
type Options struct {
	Bin        string   // the kelp binary
	Images     string   // directory of image archives for every node
	Dir        string   // the lab's state (KELP_LAB_DIR); must not exist yet or be empty
	ServerArgs []string // extra `kelp server` arguments, e.g. scaled-down timings
	AgentArgs  []string // extra `kelp agent` arguments
}

// Lab is a running lab.
type Lab struct {
	Dir        string
	Kubeconfig string
	Config     *rest.Config
	Client     *kubernetes.Clientset
	env        []string
}

// Script is the path of scripts/lab.sh in this checkout.
func Script() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "lab.sh")
}

// Up runs `lab.sh up n` and returns the lab with an admin client. On
// failure the lab is taken down again.
func Up(n int, o Options) (*Lab, error) {
	l := &Lab{Dir: o.Dir, env: append(os.Environ(),
		"KELP_BIN="+o.Bin, "KELP_LAB_OWNER="+strconv.Itoa(os.Getpid()), "KELP_LAB_DIR="+o.Dir, "KELP_LAB_IMAGES="+o.Images,
		"KELP_LAB_SERVER_ARGS="+strings.Join(o.ServerArgs, " "),
		"KELP_LAB_AGENT_ARGS="+strings.Join(o.AgentArgs, " "))}
	if out, err := l.Run("up", strconv.Itoa(n)); err != nil {
		_, _ = l.Run("down")
		return nil, fmt.Errorf("lab.sh up %d: %v\n%s", n, err, out)
	}
	out, err := l.Run("kubeconfig")
	if err != nil {
		return nil, fmt.Errorf("lab.sh kubeconfig: %v\n%s", err, out)
	}
	l.Kubeconfig = strings.TrimSpace(out)
	if l.Config, err = clientcmd.BuildConfigFromFlags("", l.Kubeconfig); err != nil {
		return nil, err
	}
	l.Config.QPS, l.Config.Burst = 100, 200
	if l.Client, err = kubernetes.NewForConfig(l.Config); err != nil {
		return nil, err
	}
	return l, nil
}

// Run runs lab.sh with args and returns its combined output.
func (l *Lab) Run(args ...string) (string, error) { return l.RunEnv(nil, args...) }

// RunEnv runs lab.sh with args and env added to (or replacing in) the
// lab's environment, e.g. other KELP_LAB_AGENT_ARGS for one revival.
func (l *Lab) RunEnv(env []string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{Script()}, args...)...)
	cmd.Env = append(slices.Clone(l.env), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Down runs `lab.sh down`.
func (l *Lab) Down() error {
	if out, err := l.Run("down"); err != nil {
		return fmt.Errorf("lab.sh down: %v\n%s", err, out)
	}
	return nil
}

// Kill powers a node off (`lab.sh kill`).
func (l *Lab) Kill(node string) error {
	if out, err := l.Run("kill", node); err != nil {
		return fmt.Errorf("lab.sh kill %s: %v\n%s", node, err, out)
	}
	return nil
}

// Revive powers a node on and waits until it is Ready (`lab.sh revive`).
func (l *Lab) Revive(node string) error {
	if out, err := l.Run("revive", node); err != nil {
		return fmt.Errorf("lab.sh revive %s: %v\n%s", node, err, out)
	}
	return nil
}

// Exec runs a command in a node's network namespace (`lab.sh exec`).
func (l *Lab) Exec(node string, cmd ...string) (string, error) {
	return l.Run(append([]string{"exec", node}, cmd...)...)
}

// Nodes are the lab's node names, in order.
func (l *Lab) Nodes() []string {
	files, _ := filepath.Glob(filepath.Join(l.Dir, "node-*.ip"))
	var nodes []string
	for _, f := range files {
		nodes = append(nodes, strings.TrimSuffix(filepath.Base(f), ".ip"))
	}
	sort.Slice(nodes, func(i, j int) bool {
		return len(nodes[i]) < len(nodes[j]) || len(nodes[i]) == len(nodes[j]) && nodes[i] < nodes[j]
	})
	return nodes
}

// IP is a node's lab address.
func (l *Lab) IP(node string) string {
	b, _ := os.ReadFile(filepath.Join(l.Dir, node+".ip"))
	return strings.TrimSpace(string(b))
}

// PID is the node's kelp process, 0 if it is off.
func (l *Lab) PID(node string) int {
	b, _ := os.ReadFile(filepath.Join(l.Dir, node+".pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// DataDir is a node's data dir (its disk).
func (l *Lab) DataDir(node string) string { return filepath.Join(l.Dir, node) }

// Netns is the path of a node's network namespace.
func (l *Lab) Netns(node string) string { return "/run/netns/kelp-lab-" + node }

// LogTail is the last n lines of a node's log.
func (l *Lab) LogTail(node string, n int) string {
	b, _ := os.ReadFile(filepath.Join(l.Dir, node+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Boot is when lab.sh last started kelp on the node.
func (l *Lab) Boot(node string) (time.Time, error) {
	b, err := os.ReadFile(filepath.Join(l.Dir, node+".boot"))
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
}

// PodNetns is the path of a pod's network namespace on a node.
func (l *Lab) PodNetns(node string, podUID types.UID) string {
	return filepath.Join("/run/kelp-lab", node, "netns", string(podUID))
}

// NodeConfig is the client config of a node's own identity
// (system:node:<node>), from the kubeconfig its join wrote.
func (l *Lab) NodeConfig(node string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", filepath.Join(l.DataDir(node), "agent", "kubelet.kubeconfig"))
}

// HTTPClient sends requests from inside a node's network namespace, one
// connection per request (the service proxy picks a backend per
// connection).
func (l *Lab) HTTPClient(node string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil,
		DialContext: DialIn(l.Netns(node))}}
}

// DialIn returns a dialer whose sockets are created in the network
// namespace pinned at path; a socket stays in the namespace it was made in.
func DialIn(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := bridge.InNetNSPath(path, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// HostState summarizes what a lab may change on the host and `lab.sh
// down` must restore: links, network namespaces, nftables tables, the
// lab's mounts and cgroups.
func HostState() string {
	var b strings.Builder
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			b.WriteString(strings.TrimSuffix(f[1], ":") + " ")
		}
	}
	ns, _ := exec.Command("ip", "netns", "list").Output()
	tables, _ := exec.Command("nft", "list", "tables").Output()
	fmt.Fprintf(&b, "\nnetns: %s\nnft: %s\n", strings.TrimSpace(string(ns)), strings.TrimSpace(string(tables)))
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, "kelp-lab") {
			b.WriteString("mount: " + line + "\n")
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/kelp-lab")
	for _, c := range cgroups {
		b.WriteString("cgroup: " + c + "\n")
	}
	return b.String()
}
