package kubelet

// A pod's fsGroup, as upstream's kubelet applies it (volume.SetVolumeOwnership):
// every file and directory of a volume that supports ownership management
// is given the group, made readable by it (and writable, for writable
// volumes), and directories get the setgid bit so that what containers
// create there keeps the group; the containers run with the group among
// their supplementary groups (containerSecurity). Symlinks are left alone.

import (
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

const (
	fsGroupRWMask = 0o660 // writable volumes (emptyDir)
	fsGroupROMask = 0o440 // configMap, secret, downwardAPI, projected
	fsGroupDirX   = 0o110 // directories: the group may enter them
)

// fsGroupOf is the pod's fsGroup, if it has one.
func fsGroupOf(pod *corev1.Pod) (int64, bool) {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return *sc.FSGroup, true
	}
	return 0, false
}

// setVolumeOwnership gives dir and everything below it to group gid.
func setVolumeOwnership(dir string, gid int64, readOnly bool) error {
	mask := fs.FileMode(fsGroupRWMask)
	if readOnly {
		mask = fsGroupROMask
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) | mask
		if d.IsDir() {
			mode |= fs.ModeSetgid | fsGroupDirX
		}
		return os.Chmod(p, mode)
	})
}
