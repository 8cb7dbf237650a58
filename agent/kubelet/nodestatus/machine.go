package nodestatus

import (
	"os"
	goruntime "runtime"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxPods is the pods capacity every node reports, as upstream's default.
const MaxPods = 110

// Machine is the host the node runs on, as the node status reports it.
type Machine interface {
	// Capacity is what the host has: CPUs, memory, ephemeral storage, pods.
	Capacity() corev1.ResourceList
	// SystemInfo identifies the host: machine and boot IDs, kernel, OS.
	// The kubelet fills in the runtime's and its own version.
	SystemInfo() corev1.NodeSystemInfo
	Hostname() string
	// Filesystem is the space available on the node's filesystem (the
	// kubelet's nodefs: the data dir's) and its size, in bytes.
	Filesystem() (available, capacity uint64, err error)
}

// Host is the machine kelp runs on; DataDir's filesystem is the node's
// ephemeral storage.
type Host struct{ DataDir string }

// Capacity reads what the machine has: CPUs, memory, the data dir's
// filesystem, and 110 pods as upstream.
func (h Host) Capacity() corev1.ResourceList {
	list := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(MaxPods, resource.DecimalSI),
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI)
	}
	var fs unix.Statfs_t
	if unix.Statfs(h.DataDir, &fs) == nil {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*int64(fs.Bsize), resource.BinarySI)
	}
	return list
}

func (h Host) Filesystem() (available, capacity uint64, err error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(h.DataDir, &fs); err != nil {
		return 0, 0, err
	}
	return fs.Bavail * uint64(fs.Bsize), fs.Blocks * uint64(fs.Bsize), nil
}

func (Host) SystemInfo() corev1.NodeSystemInfo {
	return corev1.NodeSystemInfo{
		MachineID:       readTrimmed("/etc/machine-id"),
		SystemUUID:      readTrimmed("/sys/class/dmi/id/product_uuid"),
		BootID:          readTrimmed("/proc/sys/kernel/random/boot_id"),
		KernelVersion:   kernelVersion(),
		OSImage:         osImage(),
		OperatingSystem: goruntime.GOOS,
		Architecture:    goruntime.GOARCH,
	}
}

func (Host) Hostname() string {
	h, _ := os.Hostname()
	return h
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func kernelVersion() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}
