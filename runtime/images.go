package runtime

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/images"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/dirwatch"
)

// Snapshotter is the snapshotter images are unpacked for.
const Snapshotter = "overlayfs"

// imageDirInterval is how often WatchImageDir looks for new archives when
// it cannot watch the directory.
var imageDirInterval = 2 * time.Second

// Image is what the container builder needs from the image config.
type Image struct {
	Ref, ID              string // full name; config digest
	Entrypoint, Cmd, Env []string
	WorkingDir, User     string
	StopSignal           string
}

// PullError is returned by EnsureImage when the image is not available.
// Reason is the container waiting reason the kubelet reports:
// "ErrImagePull", "ErrImageNeverPull" or "InvalidImageName".
type PullError struct{ Reason, Message string }

func (e *PullError) Error() string { return e.Message }

// NormalizeRef turns a user's image name into the full reference:
// "busybox" → "docker.io/library/busybox:latest", "foo/bar:1" →
// "docker.io/foo/bar:1"; digests and other registries are kept.
func NormalizeRef(image string) (string, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", fmt.Errorf("couldn't parse image reference %q: %w", image, err)
	}
	return named.String(), nil
}

// defaultPullPolicy is upstream's: Always for ":latest" or no tag (and no
// digest), IfNotPresent otherwise.
func defaultPullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tag := ""
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	_, digested := named.(reference.Digested)
	if tag == "" && !digested {
		tag = "latest"
	}
	if tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// ImportArchive imports one OCI or docker-save archive (tar, optionally
// gzip-compressed) and returns the image names it created, unpacked for the
// overlayfs snapshotter. An archive that names no image is an error.
func (r *Runtime) ImportArchive(ctx context.Context, path string) ([]string, error) {
	ctx = r.ctx(ctx)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var rd io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
		defer gz.Close()
		rd = gz
	}
	imgs, err := r.client.Import(ctx, rd,
		// An OCI ref.name annotation that is a full reference names the
		// image; a bare tag ("1.35") cannot, so it is dropped.
		containerd.WithImageRefTranslator(func(name string) string {
			if n, err := NormalizeRef(name); err == nil && strings.ContainsAny(name, "/:@") {
				return n
			}
			return ""
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("import %s: the archive names no image (OCI archives need the %q manifest annotation, docker-save archives RepoTags)", path, images.AnnotationImageName)
	}
	is := r.client.ImageService()
	seen := map[string]bool{}
	var names []string
	for _, img := range imgs {
		name := img.Name
		if n, err := NormalizeRef(name); err == nil && n != name {
			// The annotation said e.g. "busybox:1.35": record the name pods
			// will ask for, too.
			alias := images.Image{Name: n, Target: img.Target}
			if _, err := is.Update(ctx, alias, "target"); err != nil {
				if !errdefs.IsNotFound(err) {
					return nil, fmt.Errorf("import %s: %w", path, err)
				}
				if _, err := is.Create(ctx, alias); err != nil && !errdefs.IsAlreadyExists(err) {
					return nil, fmt.Errorf("import %s: %w", path, err)
				}
			}
			name = n
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		ci := containerd.NewImageWithPlatform(r.client, images.Image{Name: name, Target: img.Target}, platforms.Default())
		if err := ci.Unpack(ctx, Snapshotter); err != nil {
			return nil, fmt.Errorf("import %s: unpack %s: %w", path, name, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// fileStamp identifies one version of an archive in the images directory.
type fileStamp struct {
	size  int64
	mtime time.Time
}

// imported remembers, per Runtime, which archive versions were already
// imported (or failed), so ImportDir handles each version once.
var (
	importedMu sync.Mutex
	imported   = map[*Runtime]map[string]fileStamp{}
)

func isArchive(name string) bool {
	return strings.HasSuffix(name, ".tar") || strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz")
}

// ImportDir imports every *.tar, *.tar.gz and *.tgz in dir once,
// remembering (path, size, mtime) so unchanged files are not imported again.
// Errors are logged per file (and the file is retried once it changes); only
// an unreadable directory is an error. A missing directory is not.
func (r *Runtime) ImportDir(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !isArchive(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path) // follow symlinks
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		stamp := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
		importedMu.Lock()
		seen := imported[r]
		if seen == nil {
			seen = map[string]fileStamp{}
			imported[r] = seen
		}
		old, ok := seen[path]
		importedMu.Unlock()
		if ok && old == stamp {
			continue
		}
		start := time.Now()
		names, err := r.ImportArchive(ctx, path)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logrus.Errorf("images: %v", err)
		} else {
			logrus.Infof("images: imported %s from %s in %s", strings.Join(names, ", "), path, time.Since(start).Round(time.Millisecond))
		}
		importedMu.Lock()
		seen[path] = stamp
		importedMu.Unlock()
	}
	return nil
}

// WatchImageDir imports the archives in dir at once, then again whenever a
// file there is closed after writing, renamed in or linked, until ctx ends
// (k3s's air-gap images directory). inotify rather than polling: an idle
// node wakes for nothing, and an archive still being copied is not read
// half-written. Where inotify is unavailable (its per-user limits
// reached), it looks every imageDirInterval instead.
func (r *Runtime) WatchImageDir(ctx context.Context, dir string) {
	defer func() {
		importedMu.Lock()
		delete(imported, r)
		importedMu.Unlock()
	}()
	// One loop for both ways: nil channels never fire.
	var changed, lost <-chan struct{}
	var tick <-chan time.Time
	w, err := dirwatch.New(dir)
	if err != nil {
		logrus.Warnf("images: %v; looking at %s every %s instead", err, dir, imageDirInterval)
		t := time.NewTicker(imageDirInterval)
		defer t.Stop()
		tick = t.C
	} else {
		defer w.Close()
		changed, lost = w.C, w.Lost
	}
	for {
		if err := r.ImportDir(ctx, dir); err != nil && ctx.Err() == nil {
			logrus.Errorf("images: %s: %v", dir, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-lost:
			if err := w.Rewatch(); err != nil {
				logrus.Errorf("images: watching %s again: %v", dir, err)
			}
		case <-changed:
		case <-tick:
		}
	}
}

// EnsureImage returns the local image for ref honouring the pull policy
// ("" means upstream's default). With Always a failed pull falls back to the
// local image when there is one (air-gapped nodes).
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy corev1.PullPolicy) (Image, error) {
	ctx = r.ctx(ctx)
	name, err := NormalizeRef(ref)
	if err != nil {
		return Image{}, &PullError{Reason: "InvalidImageName", Message: fmt.Sprintf("Failed to apply default image tag %q: %v", ref, err)}
	}
	if policy == "" {
		policy = defaultPullPolicy(ref)
	}
	local, err := r.client.GetImage(ctx, name)
	if err != nil && !errdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("image %q: %w", name, err)
	}
	present := err == nil

	switch policy {
	case corev1.PullNever:
		if !present {
			return Image{}, &PullError{Reason: "ErrImageNeverPull", Message: fmt.Sprintf("Container image %q is not present with pull policy of Never", ref)}
		}
		return r.localImage(ctx, local)
	case corev1.PullIfNotPresent:
		if present {
			return r.localImage(ctx, local)
		}
	case corev1.PullAlways:
	default:
		return Image{}, fmt.Errorf("unknown image pull policy %q", policy)
	}

	start := time.Now()
	pulled, perr := r.client.Pull(ctx, name,
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(Snapshotter),
		containerd.WithPlatformMatcher(platforms.Default()),
	)
	if perr == nil {
		logrus.Infof("images: pulled %s in %s", name, time.Since(start).Round(time.Millisecond))
		return imageOf(ctx, pulled)
	}
	if present && ctx.Err() == nil {
		logrus.Warnf("images: pull of %s failed, using the local image: %v", name, perr)
		return r.localImage(ctx, local)
	}
	return Image{}, &PullError{Reason: "ErrImagePull", Message: fmt.Sprintf("failed to pull and unpack image %q: %v", name, perr)}
}

// localImage makes sure a present image is unpacked and reads its config.
func (r *Runtime) localImage(ctx context.Context, img containerd.Image) (Image, error) {
	ok, err := img.IsUnpacked(ctx, Snapshotter)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w", img.Name(), err)
	}
	if !ok {
		if err := img.Unpack(ctx, Snapshotter); err != nil {
			return Image{}, fmt.Errorf("image %q: unpack: %w", img.Name(), err)
		}
	}
	return imageOf(ctx, img)
}

func imageOf(ctx context.Context, img containerd.Image) (Image, error) {
	desc, err := img.Config(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: config: %w", img.Name(), err)
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: config: %w", img.Name(), err)
	}
	c := spec.Config
	return Image{
		Ref:        img.Name(),
		ID:         desc.Digest.String(),
		Entrypoint: c.Entrypoint,
		Cmd:        c.Cmd,
		Env:        c.Env,
		WorkingDir: c.WorkingDir,
		User:       c.User,
		StopSignal: c.StopSignal,
	}, nil
}
