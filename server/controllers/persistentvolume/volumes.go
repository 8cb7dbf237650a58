package persistentvolume

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	volumehelpers "k8s.io/component-helpers/storage/volume"
)

func (c *Controller) syncVolumeKey(ctx context.Context, name string) error {
	volume, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncVolume(ctx, volume)
}

// syncVolume follows upstream's syncVolume: a volume without a claimRef is
// Available, as is one pre-bound (claimRef without UID) whose claim has
// not been bound yet; one whose claim is gone is Released and reclaimed;
// one whose claim is bound elsewhere is unbound (or, provisioned for that
// claim, reclaimed).
func (c *Controller) syncVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		_, err := c.updateVolumePhase(ctx, volume, corev1.VolumeAvailable, "")
		return err
	}
	claim, err := c.claimOf(ctx, volume)
	if err != nil {
		return err
	}
	switch {
	case claim == nil:
		// The claim was deleted: release the volume (a Failed one stays
		// Failed, so the user sees what went wrong) and reclaim it.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, volume)
	case claim.Spec.VolumeName == "":
		if volumehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			c.recorder.Event(volume, corev1.EventTypeWarning, reasonVolumeMismatch, fmt.Sprintf(
				"Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name))
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch, fmt.Sprintf(
				"Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", volume.Name))
			return nil
		}
		// Bound to a claim that is not bound yet (a provisioner's or the
		// scheduler's volume, or the claim's update has not arrived): the
		// claim's sync finishes it.
		c.claimQueue.Add(claim.Namespace + "/" + claim.Name)
		return nil
	case claim.Spec.VolumeName == volume.Name:
		_, err = c.updateVolumePhase(ctx, volume, corev1.VolumeBound, "")
		return err
	case metav1.HasAnnotation(volume.ObjectMeta, volumehelpers.AnnDynamicallyProvisioned) &&
		volume.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that got another volume: not needed.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, volume)
	default:
		// The claim is bound to another volume: unbind this one.
		return c.unbindVolume(ctx, volume)
	}
}

// claimOf is the claim the volume's claimRef names, nil if it is gone or
// has another UID (deleted and created again). A volume not yet Released
// is never released on the cache's word alone: a provisioner's or the
// scheduler's fresh binding may name a claim the cache does not have yet,
// so the API is asked before concluding the claim is gone.
func (c *Controller) claimOf(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	ref := volume.Spec.ClaimRef
	claim, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	released := volume.Status.Phase == corev1.VolumeReleased || volume.Status.Phase == corev1.VolumeFailed
	if (claim == nil && !released) || (claim != nil && claim.UID != ref.UID) {
		claim, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	if claim != nil && claim.UID != ref.UID {
		return nil, nil
	}
	return claim, nil
}

// unbindVolume undoes a binding: the controller's own binding goes
// entirely; a user's pre-binding keeps the claim's name, losing only the
// UID, so the volume waits for that claim again.
func (c *Controller) unbindVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	clone := volume.DeepCopy()
	if metav1.HasAnnotation(volume.ObjectMeta, volumehelpers.AnnBoundByController) {
		clone.Spec.ClaimRef = nil
		delete(clone.Annotations, volumehelpers.AnnBoundByController)
		if len(clone.Annotations) == 0 {
			clone.Annotations = nil
		}
	} else {
		clone.Spec.ClaimRef.UID = ""
	}
	updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	_, err = c.updateVolumePhase(ctx, updated, corev1.VolumeAvailable, "")
	return err
}

// reclaimVolume applies the reclaim policy of a Released volume. Retain
// keeps it as it is. Delete of a volume an external provisioner made is
// that provisioner's to do (it deletes the volume once Released); any
// other volume would need an in-tree deleter, which kelp does not have, so
// it is Failed with upstream's message. Recycle likewise has no recycler.
func (c *Controller) reclaimVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	switch volume.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimRecycle:
		_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonVolumeFailedRecycle,
			"No recycler plugin found for the volume!")
		return err
	case corev1.PersistentVolumeReclaimDelete:
		if provisioner := volume.Annotations[volumehelpers.AnnDynamicallyProvisioned]; provisioner != "" && !strings.HasPrefix(provisioner, "kubernetes.io/") {
			return nil
		}
		msg := fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", volume.Name)
		_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonVolumeFailedDelete, msg)
		return err
	default:
		_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonUnknownReclaimPolicy,
			"Volume has unrecognized PersistentVolumeReclaimPolicy")
		return err
	}
}

// updateVolumePhase sets the volume's phase and message, and the time of
// the phase's last change.
func (c *Controller) updateVolumePhase(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase && volume.Status.Message == message {
		return volume, nil
	}
	clone := volume.DeepCopy()
	if clone.Status.Phase != phase {
		now := metav1.NewTime(c.now())
		clone.Status.LastPhaseTransitionTime = &now
	}
	clone.Status.Phase = phase
	clone.Status.Message = message
	return c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, clone, metav1.UpdateOptions{})
}

// updateVolumePhaseWithEvent is updateVolumePhase with an event when the
// phase changes.
func (c *Controller) updateVolumePhaseWithEvent(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, eventType, reason, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase {
		return volume, nil
	}
	updated, err := c.updateVolumePhase(ctx, volume, phase, message)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(updated, eventType, reason, message)
	return updated, nil
}
