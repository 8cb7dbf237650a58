package persistentvolume

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kelp-project/kelp/server/claims"
)

// Upstream's event reasons (pkg/controller/volume/events).
const (
	reasonFailedBinding        = "FailedBinding"
	reasonVolumeMismatch       = "VolumeMismatch"
	reasonProvisioningFailed   = "ProvisioningFailed"
	reasonExternalProvisioning = "ExternalProvisioning"
	reasonWaitForFirstConsumer = "WaitForFirstConsumer"
	reasonWaitForPodScheduled  = "WaitForPodScheduled"
	reasonClaimLost            = "ClaimLost"
	reasonClaimMisbound        = "ClaimMisbound"
	reasonVolumeFailedDelete   = "VolumeFailedDelete"
	reasonVolumeFailedRecycle  = "VolumeFailedRecycle"
	reasonUnknownReclaimPolicy = "VolumeUnknownReclaimPolicy"
)

func (c *Controller) syncClaimKey(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncClaim(ctx, claim)
}

// syncClaim: a claim whose binding was completed once is checked against
// its volume; any other is being bound.
func (c *Controller) syncClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if !metav1.HasAnnotation(claim.ObjectMeta, volumehelpers.AnnBindCompleted) {
		return c.syncUnboundClaim(ctx, claim)
	}
	return c.syncBoundClaim(ctx, claim)
}

// shouldDelayBinding: a WaitForFirstConsumer claim waits for the scheduler
// until it names a selected node.
func (c *Controller) shouldDelayBinding(claim *corev1.PersistentVolumeClaim) (bool, error) {
	if volumehelpers.IsDelayBindingProvisioning(claim) {
		return false, nil
	}
	return volumehelpers.IsDelayBindingMode(claim, c.classes)
}

func (c *Controller) syncUnboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName != "" {
		return c.syncPreboundClaim(ctx, claim)
	}
	delay, err := c.shouldDelayBinding(claim)
	if err != nil {
		return err
	}
	all, err := c.volumes.List(labels.Everything())
	if err != nil {
		return err
	}
	volume, err := findBestMatch(claim, all, delay)
	if err != nil {
		return err
	}
	if volume != nil {
		return c.bind(ctx, volume, claim)
	}
	// No volume: give the claim the default class if it may have one,
	// provision, or wait.
	if updated, err := c.assignDefaultClass(ctx, claim); err != nil || updated {
		return err
	}
	switch {
	case delay && !volumehelpers.IsDelayBindingProvisioning(claim):
		if err := c.eventForDelayedClaim(claim); err != nil {
			return err
		}
	case volumehelpers.GetPersistentVolumeClaimClass(claim) != "":
		// The claim's status is the provisioner's business from here;
		// the next sync binds what it makes.
		return c.provisionClaim(ctx, claim)
	default:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonFailedBinding, "no persistent volumes available for this claim and no storage class is set")
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// syncPreboundClaim binds a claim whose spec.volumeName a user set.
func (c *Controller) syncPreboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	volume, err := c.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		// The volume may come later; the claim waits for it.
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	}
	if err != nil {
		return err
	}
	switch {
	case volume.Spec.ClaimRef == nil:
		if err := checkVolumeSatisfiesClaim(volume, claim); err != nil {
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch, err.Error())
			_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
			return err
		}
		return c.bind(ctx, volume, claim)
	case volumehelpers.IsVolumeBoundToClaim(volume, claim):
		return c.bind(ctx, volume, claim)
	case !metav1.HasAnnotation(claim.ObjectMeta, volumehelpers.AnnBoundByController):
		// The user asked for a volume that is someone else's: wait.
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	default:
		return fmt.Errorf("invalid binding of claim %s/%s to volume %q: volume already claimed by %s/%s",
			claim.Namespace, claim.Name, volume.Name, volume.Spec.ClaimRef.Namespace, volume.Spec.ClaimRef.Name)
	}
}

// checkVolumeSatisfiesClaim is what a volume named by a claim must offer.
func checkVolumeSatisfiesClaim(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	if volume.DeletionTimestamp != nil {
		return fmt.Errorf("the volume is marked for deletion %q", volume.Name)
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := volume.Spec.Capacity[corev1.ResourceStorage]
	if have.Value() < want.Value() {
		return fmt.Errorf("requested PV is too small")
	}
	if volumehelpers.GetPersistentVolumeClass(volume) != volumehelpers.GetPersistentVolumeClaimClass(claim) {
		return fmt.Errorf("storageClassName does not match")
	}
	if volumehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
		return fmt.Errorf("incompatible volumeMode and the requested volume mode")
	}
	if a, b := claim.Spec.VolumeAttributesClassName, volume.Spec.VolumeAttributesClassName; (a == nil) != (b == nil) || (a != nil && *a != *b) {
		return fmt.Errorf("volumeAttributesClassName does not match")
	}
	return nil
}

func (c *Controller) syncBoundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		_, err := c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimLost,
			"Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		return err
	}
	volume, err := c.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimLost,
			"Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		return err
	}
	if err != nil {
		return err
	}
	if volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID == claim.UID {
		// Unbound volume (or one whose update has not reached the cache
		// yet): bind again; a bound one only gets any missing status.
		return c.bind(ctx, volume, claim)
	}
	_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimMisbound,
		"Two claims are bound to the same volume, this one is bound incorrectly")
	return err
}

// assignDefaultClass gives a claim created without storageClassName the
// default class once there is one (upstream's retroactive default
// StorageClass assignment). A claim with storageClassName "" asked for no
// class and keeps it.
func (c *Controller) assignDefaultClass(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if volumehelpers.PersistentVolumeClaimHasClass(claim) {
		return false, nil
	}
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return false, err
	}
	def := claims.DefaultClass(classes)
	if def == nil {
		return false, nil
	}
	clone := claim.DeepCopy()
	clone.Spec.StorageClassName = &def.Name
	if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("can't update PersistentVolumeClaim[%s/%s]: %w", claim.Namespace, claim.Name, err)
	}
	return true, nil
}

// eventForDelayedClaim says why a WaitForFirstConsumer claim waits: for a
// pod to use it, or for the pods that do to be scheduled.
func (c *Controller) eventForDelayedClaim(claim *corev1.PersistentVolumeClaim) error {
	objs, err := c.pods.ByIndex(PodClaimIndex, claim.Namespace+"/"+claim.Name)
	if err != nil {
		return err
	}
	var waiting []string
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Spec.NodeName != "" {
			continue
		}
		waiting = append(waiting, pod.Name)
	}
	switch len(waiting) {
	case 0:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonWaitForFirstConsumer, "waiting for first consumer to be created before binding")
	case 1:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonWaitForPodScheduled, fmt.Sprintf("waiting for pod %s to be scheduled", waiting[0]))
	default:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonWaitForPodScheduled, fmt.Sprintf("waiting for pods %s to be scheduled", strings.Join(waiting, ",")))
	}
	return nil
}

// provisionClaim hands the claim to its class's provisioner: kelp has no
// in-tree volume plugins, so every provisioner is external and learns of
// the claim through the storage-provisioner annotations, as upstream's
// CSI provisioners do.
func (c *Controller) provisionClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	class, err := c.classes.Get(volumehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, err.Error())
		return err
	}
	if strings.HasPrefix(class.Provisioner, "kubernetes.io/") {
		// An in-tree plugin's name: upstream would provision itself, and
		// kelp has no such plugin.
		err := fmt.Errorf("no volume plugin matched name: %s", class.Provisioner)
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, err.Error())
		return err
	}
	if claim.Annotations[volumehelpers.AnnStorageProvisioner] != class.Provisioner ||
		claim.Annotations[volumehelpers.AnnBetaStorageProvisioner] != class.Provisioner {
		clone := claim.DeepCopy()
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, volumehelpers.AnnStorageProvisioner, class.Provisioner)
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, volumehelpers.AnnBetaStorageProvisioner, class.Provisioner)
		if claim, err = c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	c.recorder.Event(claim, corev1.EventTypeNormal, reasonExternalProvisioning, fmt.Sprintf(
		"Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. "+
			"If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.Provisioner))
	return nil
}

// bind binds volume and claim to each other and marks both Bound, each
// step only if needed, in upstream's order: the volume's claimRef, its
// phase, the claim's volumeName and annotations, its status.
func (c *Controller) bind(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	bound, dirty, err := volumehelpers.GetBindVolumeToClaim(volume, claim)
	if err != nil {
		return err
	}
	if dirty {
		if volume, err = c.client.CoreV1().PersistentVolumes().Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if claim, err = c.bindClaimToVolume(ctx, claim, volume); err != nil {
		return err
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimBound, volume)
	return err
}

func (c *Controller) bindClaimToVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	dirty := false
	if claim.Spec.VolumeName != volume.Name {
		clone.Spec.VolumeName = volume.Name
		if !metav1.HasAnnotation(clone.ObjectMeta, volumehelpers.AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&clone.ObjectMeta, volumehelpers.AnnBoundByController, "yes")
		}
		dirty = true
	}
	if !metav1.HasAnnotation(clone.ObjectMeta, volumehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, volumehelpers.AnnBindCompleted, "yes")
		dirty = true
	}
	if !dirty {
		return claim, nil
	}
	return c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
}

// updateClaimStatus sets the claim's phase and, from its volume, its
// access modes and (when it becomes Bound) its capacity; a claim without
// a volume has neither.
func (c *Controller) updateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	clone.Status.Phase = phase
	if volume == nil {
		clone.Status.AccessModes = nil
		clone.Status.Capacity = nil
	} else {
		clone.Status.AccessModes = volume.Spec.AccessModes
		// A capacity differing from the volume's may be meant (a
		// filesystem smaller than its device): set only on becoming Bound.
		if claim.Status.Phase != phase {
			q, ok := volume.Spec.Capacity[corev1.ResourceStorage]
			if !ok {
				return nil, fmt.Errorf("PersistentVolume %q is without a storage capacity", volume.Name)
			}
			if have, ok := claim.Status.Capacity[corev1.ResourceStorage]; !ok || have.Cmp(q) != 0 {
				clone.Status.Capacity = volume.Spec.Capacity
			}
		}
	}
	if equality.Semantic.DeepEqual(claim.Status, clone.Status) {
		return claim, nil
	}
	return c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
}

// updateClaimStatusWithEvent is updateClaimStatus with an event when the
// phase changes.
func (c *Controller) updateClaimStatusWithEvent(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume, eventType, reason, message string) (*corev1.PersistentVolumeClaim, error) {
	if claim.Status.Phase == phase {
		return claim, nil
	}
	updated, err := c.updateClaimStatus(ctx, claim, phase, volume)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(updated, eventType, reason, message)
	return updated, nil
}
