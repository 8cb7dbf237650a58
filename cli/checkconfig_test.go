package cli

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	urfave "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/hostcheck"
)

// fakeHost is a host with everything kelp needs except what missing names
// ("runc", a port "10250/tcp"); it records the ports and dir it is asked
// about.
func fakeHost(missing ...string) (*hostcheck.Host, *[]string) {
	var asked []string
	lacks := func(s string) bool {
		for _, m := range missing {
			if m == s {
				return true
			}
		}
		return false
	}
	fs := fstest.MapFS{
		"proc/filesystems": {Data: []byte("nodev\toverlay\n")},
		"proc/cgroups":     {Data: []byte("memory\t0\t10\t1\n")},
		"proc/sys/net/bridge/bridge-nf-call-iptables": {Data: []byte("1\n")},
		"sys/fs/cgroup/cgroup.controllers":            {Data: []byte("cpu memory pids\n")},
	}
	for _, m := range []string{"bridge", "veth", "vxlan", "nf_tables"} {
		fs["sys/module/"+m+"/uevent"] = &fstest.MapFile{}
	}
	h := &hostcheck.Host{
		FS: fs,
		LookPath: func(f string) (string, error) {
			if lacks(f) {
				return "", errors.New("not found")
			}
			return "/usr/bin/" + f, nil
		},
		Output:     func(name string, _ ...string) (string, error) { return name + " version 1\n", nil },
		ListTables: func() (int, error) { return 0, nil },
		Listen: func(network string, port int) error {
			p := fmt.Sprintf("%d/%s", port, network)
			asked = append(asked, p)
			if lacks(p) {
				return syscall.EADDRINUSE
			}
			return nil
		},
		FreeBytes: func(dir string) (uint64, error) { asked = append(asked, dir); return 10 << 30, nil },
	}
	return h, &asked
}

func TestCheckConfigOK(t *testing.T) {
	clearEnv(t)
	h, asked := fakeHost()
	out, err := run(t, checkConfigCommand(func() *hostcheck.Host { return h }))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Without a kernel config the nftables expressions cannot be told: WARN,
	// which does not fail the command.
	const warn = "WARN    kernel: nftables ip family, nat, masq, numgen, ct, fib (no kernel config to tell)"
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "OK ") && l != warn {
			t.Errorf("line %q", l)
		}
	}
	if len(lines) != 16 {
		t.Errorf("%d lines:\n%s", len(lines), out)
	}
	if got := strings.Join(*asked, " "); got != "6443/tcp 10250/tcp 8472/udp /" {
		t.Errorf("checked %s, want the default ports and the data dir's filesystem", got)
	}
}

// A missing item: its line says MISSING, the hint follows indented, and
// the command exits 1.
func TestCheckConfigMissing(t *testing.T) {
	clearEnv(t)
	h, _ := fakeHost("runc", "10250/tcp")
	out, err := run(t, checkConfigCommand(func() *hostcheck.Host { return h }))
	var exit urfave.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("err %v, want exit code 1\n%s", err, out)
	}
	for _, want := range []string{
		"MISSING runc (not on PATH)\n        install it: apt-get install containerd runc",
		"MISSING port 10250/tcp for the kubelet (in use)\n        stop what listens on it",
		"OK      containerd (/usr/bin/containerd: /usr/bin/containerd version 1)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckConfigFlags(t *testing.T) {
	clearEnv(t)
	h, asked := fakeHost()
	t.Setenv("KELP_VXLAN_PORT", "4789")
	if out, err := run(t, checkConfigCommand(func() *hostcheck.Host { return h }),
		"--https-listen-port", "0", "--kubelet-port", "10251", "-d", "/srv/kelp"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Join(*asked, " "); got != "10251/tcp 4789/udp /" {
		t.Errorf("checked %s", got)
	}
	for _, f := range CheckConfig().Flags {
		name := f.Names()[0]
		want := "KELP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if envs := f.(interface{ GetEnvVars() []string }).GetEnvVars(); len(envs) != 1 || envs[0] != want {
			t.Errorf("--%s: env %v, want %s", name, envs, want)
		}
	}
}
