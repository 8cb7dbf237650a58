package agent

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kelp-project/kelp/hostcheck"
	"github.com/kelp-project/kelp/runtime/cgroups"
)

// A Raspberry Pi whose kernel left the memory controller off: the agent
// says so at start, with the cmdline.txt line that turns it on.
func TestReportCgroupsMemoryControllerOff(t *testing.T) {
	pi := &hostcheck.Host{FS: fstest.MapFS{
		"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpuset cpu io pids\n")},
		"proc/cgroups":                     {Data: []byte("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t80\t1\nmemory\t0\t80\t0\n")},
		"proc/device-tree/model":           {Data: []byte("Raspberry Pi 4 Model B Rev 1.4\x00")},
		"boot/firmware/cmdline.txt":        {Data: []byte("console=serial0,115200 root=PARTUUID=1234-02 rootwait\n")},
	}}
	l, err := cgroups.NewLayout(cgroups.Cgroupfs, "/kubepods")
	if err != nil {
		t.Fatal(err)
	}
	msgs := reportCgroups(cgroups.Host{Root: "/sys/fs/cgroup", Version: cgroups.V2, Layout: l}, pi.Cgroups())
	if len(msgs) != 1 {
		t.Fatalf("messages %q, want one for the memory controller", msgs)
	}
	for _, want := range []string{"memory controller", "not enforced", "boot/firmware/cmdline.txt", hostcheck.PiCmdline} {
		if !strings.Contains(msgs[0], want) {
			t.Errorf("message %q lacks %q", msgs[0], want)
		}
	}
	// A host with the controller reports nothing.
	ok := &hostcheck.Host{FS: fstest.MapFS{
		"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpuset cpu io memory pids\n")},
		"proc/cgroups":                     {Data: []byte("memory\t0\t80\t1\n")},
	}}
	if msgs := reportCgroups(cgroups.Host{Root: "/sys/fs/cgroup", Version: cgroups.V2, Layout: l}, ok.Cgroups()); len(msgs) != 0 {
		t.Errorf("messages on a good host: %q", msgs)
	}
}

func TestConfigCgroupsRejectsSystemdWithoutSystemd(t *testing.T) {
	if _, err := (Config{CgroupDriver: "systemd"}).cgroups(); err == nil && !systemdRunning() {
		t.Error("systemd driver accepted without a running systemd")
	}
	if _, err := (Config{CgroupDriver: "cgroups"}).cgroups(); err == nil {
		t.Error("unknown driver accepted")
	}
}

func systemdRunning() bool {
	_, err := os.Stat(cgroups.SystemdRunDir)
	return err == nil
}
