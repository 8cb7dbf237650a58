// Package localpath is the node's local-path provisioner (k3s ships
// rancher's local-path-provisioner; kelp runs one per node, in the agent):
// for each claim the PV binder has handed to provisioner kelp.dev/local-path
// and the scheduler has placed on this node, it makes a directory under
// <data-dir>/storage and a hostPath PersistentVolume for it, pinned to the
// node; when such a volume is Released under reclaim policy Delete, it
// removes the directory, then the volume. It is an API client like any
// controller (informers, a work queue, Events on the claims), under its own
// identity, config.LocalPathProvisionerUser; the kubelet mounts the volumes
// (agent/kubelet/volumes.go). The contract with the server's half is
// config/storage.go's names and upstream's annotations.
package localpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/controllers"
)

// The Events, as upstream's external-provisioner words them.
const (
	reasonProvisioning       = "Provisioning"
	reasonProvisioningFailed = "ProvisioningFailed"
	reasonProvisioned        = "ProvisioningSucceeded"
	reasonFailedDelete       = "VolumeFailedDelete"
)

// Config is one node's provisioner.
type Config struct {
	NodeName string
	// DataDir is <data-dir>: volumes go to config.LocalStorageDir(DataDir).
	DataDir string
}

// Provisioner provisions and deletes the node's local-path volumes.
type Provisioner struct {
	node     string
	root     string // config.LocalStorageDir(DataDir), cleaned
	client   kubernetes.Interface
	recorder record.EventRecorder

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister

	claimLoop, volumeLoop controllers.Loop
	// removeAll removes a volume's directory (os.RemoveAll; tests fail it).
	removeAll func(string) error
}

// EventComponent is the source of the provisioner's Events: upstream's
// external-provisioner names itself <provisioner>_<identity>.
func EventComponent(node string) string { return config.LocalPathProvisioner + "_" + node }

// New builds the provisioner on factory's informers (claims, volumes and
// classes); the caller starts the factory. Events go to recorder.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Provisioner {
	claimInf := factory.Core().V1().PersistentVolumeClaims()
	volumeInf := factory.Core().V1().PersistentVolumes()
	classInf := factory.Storage().V1().StorageClasses()
	p := &Provisioner{
		node: cfg.NodeName, root: filepath.Clean(config.LocalStorageDir(cfg.DataDir)), client: client, recorder: recorder, removeAll: os.RemoveAll,
		claims: claimInf.Lister(), volumes: volumeInf.Lister(), classes: classInf.Lister(),
	}
	p.claimLoop = controllers.Loop{Name: "local-path-provisioner claims", Queue: controllers.NewQueue("local_path_claims"),
		Synced: []cache.InformerSynced{claimInf.Informer().HasSynced, volumeInf.Informer().HasSynced, classInf.Informer().HasSynced},
		Sync:   p.syncClaim}
	p.volumeLoop = controllers.Loop{Name: "local-path-provisioner volumes", Queue: controllers.NewQueue("local_path_volumes"),
		Synced: []cache.InformerSynced{volumeInf.Informer().HasSynced}, Sync: p.syncVolume}
	enqueue := func(q controllers.Loop) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { controllers.Enqueue(q.Queue, obj) },
			UpdateFunc: func(_, obj any) { controllers.Enqueue(q.Queue, obj) },
		}
	}
	_, _ = claimInf.Informer().AddEventHandler(enqueue(p.claimLoop))
	_, _ = volumeInf.Informer().AddEventHandler(enqueue(p.volumeLoop))
	return p
}

// Run runs both loops until ctx ends.
func (p *Provisioner) Run(ctx context.Context) {
	logrus.Infof("local-path provisioner: node %s, volumes under %s", p.node, p.root)
	go p.volumeLoop.Run(ctx, 1)
	p.claimLoop.Run(ctx, 1)
}

// ours reports whether claim is this node's to provision: handed to
// kelp.dev/local-path by the PV binder, placed on this node by the
// scheduler, not bound yet and not going away.
func (p *Provisioner) ours(claim *corev1.PersistentVolumeClaim) bool {
	a := claim.Annotations
	prov := a[storagehelpers.AnnStorageProvisioner]
	if prov == "" {
		prov = a[storagehelpers.AnnBetaStorageProvisioner]
	}
	return prov == config.LocalPathProvisioner && a[storagehelpers.AnnSelectedNode] == p.node &&
		claim.Spec.VolumeName == "" && claim.DeletionTimestamp == nil
}

// VolumeName is the PersistentVolume made for a claim, as upstream names
// dynamically provisioned volumes.
func VolumeName(claimUID types.UID) string { return "pvc-" + string(claimUID) }

// dirName is the claim's directory under the storage root, as k3s's
// local-path-provisioner names it: the same claim always gets the same one.
func dirName(claimUID types.UID, namespace, name string) string {
	return VolumeName(claimUID) + "_" + namespace + "_" + name
}

// underRoot is root/name, refused for any name that is not a single path
// element, so no claim or volume can point the provisioner outside root.
func underRoot(root, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("%q is not a directory name under %s", name, root)
	}
	p := filepath.Join(root, name)
	if filepath.Dir(p) != root {
		return "", fmt.Errorf("%q is not a directory name under %s", name, root)
	}
	return p, nil
}

func (p *Provisioner) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := p.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !p.ours(claim) {
		return err
	}
	pvName := VolumeName(claim.UID)
	if done, err := p.provisioned(ctx, pvName, claim); done || err != nil {
		return err
	}
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	failed := func(err error) error {
		p.recorder.Eventf(claim, corev1.EventTypeWarning, reasonProvisioningFailed,
			"failed to provision volume with StorageClass %q: %v", className, err)
		return err
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		// Final: a directory is no block device. Not retried (the claim
		// cannot change its mode), never a silent success.
		p.recorder.Eventf(claim, corev1.EventTypeWarning, reasonProvisioningFailed,
			"%s does not support block volume provisioning", config.LocalPathProvisioner)
		return nil
	}
	p.recorder.Eventf(claim, corev1.EventTypeNormal, reasonProvisioning,
		"External provisioner is provisioning volume for claim %q", ns+"/"+name)
	pv, err := p.volumeFor(ctx, claim, pvName, className)
	if err != nil {
		return failed(err)
	}
	if err := os.MkdirAll(p.root, 0o700); err != nil {
		return failed(err)
	}
	dir := pv.Spec.HostPath.Path
	if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return failed(err)
	}
	// 0777 whatever the umask, as k3s's (the pods' users are unknown).
	if err := os.Chmod(dir, 0o777); err != nil {
		return failed(err)
	}
	if _, err := p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // made by an earlier attempt whose answer was lost
		}
		return failed(err)
	}
	logrus.Infof("local-path provisioner: %s for claim %s/%s at %s", pvName, ns, name, dir)
	p.recorder.Eventf(claim, corev1.EventTypeNormal, reasonProvisioned, "Successfully provisioned volume %s", pvName)
	return nil
}

// provisioned reports whether the claim's volume exists already (the
// binder has yet to bind it): in the cache, or, since the cache may lag
// behind our own create, in the API.
func (p *Provisioner) provisioned(ctx context.Context, pvName string, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if _, err := p.volumes.Get(pvName); err == nil {
		return true, nil
	}
	_, err := p.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("looking up volume %s of claim %s/%s: %w", pvName, claim.Namespace, claim.Name, err)
}

// volumeFor is the PersistentVolume for claim, as the contract shapes it:
// a hostPath directory pinned to this node by its hostname label.
func (p *Provisioner) volumeFor(ctx context.Context, claim *corev1.PersistentVolumeClaim, pvName, className string) (*corev1.PersistentVolume, error) {
	dir, err := underRoot(p.root, dirName(claim.UID, claim.Namespace, claim.Name))
	if err != nil {
		return nil, err
	}
	class, err := p.classes.Get(className)
	if err != nil {
		return nil, err
	}
	if class.Provisioner != config.LocalPathProvisioner {
		return nil, fmt.Errorf("StorageClass %q names provisioner %q, not %s", className, class.Provisioner, config.LocalPathProvisioner)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	request, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil, errors.New("the claim requests no storage")
	}
	labels, err := p.nodeLabels(ctx)
	if err != nil {
		return nil, err
	}
	hostname := labels[corev1.LabelHostname]
	mode := corev1.PersistentVolumeFilesystem
	if claim.Spec.VolumeMode != nil {
		mode = *claim.Spec.VolumeMode
	}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName,
			Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: config.LocalPathProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: request.DeepCopy()},
			AccessModes:                   append([]corev1.PersistentVolumeAccessMode(nil), claim.Spec.AccessModes...),
			VolumeMode:                    &mode,
			StorageClassName:              className,
			PersistentVolumeReclaimPolicy: reclaim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirOrCreate}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}}}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
		},
	}, nil
}

// nodeLabels are the node's labels; the volumes' node affinity names its
// kubernetes.io/hostname label (the kubelet sets it to the node name, which
// stands in for it if absent).
func (p *Provisioner) nodeLabels(ctx context.Context) (map[string]string, error) {
	node, err := p.client.CoreV1().Nodes().Get(ctx, p.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", p.node, err)
	}
	labels := map[string]string{}
	for k, v := range node.Labels {
		labels[k] = v
	}
	if labels[corev1.LabelHostname] == "" {
		labels[corev1.LabelHostname] = p.node
	}
	return labels, nil
}

// onNode reports whether pv is pinned to this node by its required node
// affinity.
func (p *Provisioner) onNode(ctx context.Context, pv *corev1.PersistentVolume) (bool, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false, nil
	}
	labels, err := p.nodeLabels(ctx)
	if err != nil {
		return false, err
	}
	return storagehelpers.CheckNodeAffinity(pv, labels) == nil, nil
}

// syncVolume deletes a Released volume this node provisioned under
// reclaim policy Delete: its directory first, then the object, so a
// directory that cannot go keeps its volume (and its Event) around.
func (p *Provisioner) syncVolume(ctx context.Context, name string) error {
	pv, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] != config.LocalPathProvisioner || pv.Spec.HostPath == nil {
		return nil
	}
	if mine, err := p.onNode(ctx, pv); !mine || err != nil {
		return err
	}
	dir, err := p.volumeDir(pv)
	if err != nil {
		// Not retried: the object itself is wrong, and the directory it
		// names is none of ours to remove.
		p.recorder.Eventf(pv, corev1.EventTypeWarning, reasonFailedDelete, "refusing to remove %s: %v", pv.Spec.HostPath.Path, err)
		return nil
	}
	if err := p.removeAll(dir); err != nil {
		p.recorder.Eventf(pv, corev1.EventTypeWarning, reasonFailedDelete, "removing %s: %v", dir, err)
		return err
	}
	uid := pv.UID
	err = p.client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	logrus.Infof("local-path provisioner: deleted %s and %s", name, dir)
	return nil
}

// volumeDir is the directory of a volume this provisioner made: a
// directory <volume name>_... right under the storage root. Anything else
// (an edited or forged volume) is refused rather than removed.
func (p *Provisioner) volumeDir(pv *corev1.PersistentVolume) (string, error) {
	path := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(path) != p.root {
		return "", fmt.Errorf("not a directory of %s", p.root)
	}
	base := filepath.Base(path)
	if !strings.HasPrefix(base, pv.Name+"_") {
		return "", fmt.Errorf("not the directory of volume %s", pv.Name)
	}
	return underRoot(p.root, base)
}
