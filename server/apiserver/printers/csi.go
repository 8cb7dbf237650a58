package printers

import (
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CSI kinds of storage.k8s.io/v1, as upstream's printers.
func init() {
	vaSpecDoc := storagev1.VolumeAttachmentSpec{}.SwaggerDoc()
	attacher := column("Attacher", "string", vaSpecDoc["attacher"])
	attacher.Format = "name"
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		attacher,
		column("PV", "string", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
		column("Node", "string", vaSpecDoc["nodeName"]),
		column("Attached", "boolean", storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]),
		ageColumn(),
	}, func(va *storagev1.VolumeAttachment, now time.Time) []interface{} {
		return []interface{}{va.Name, va.Spec.Attacher, deref(va.Spec.Source.PersistentVolumeName), va.Spec.NodeName, va.Status.Attached, age(va.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
		ageColumn(),
	}, func(n *storagev1.CSINode, now time.Time) []interface{} {
		return []interface{}{n.Name, int64(len(n.Spec.Drivers)), age(n.ObjectMeta, now)}
	})

	driverDoc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("AttachRequired", "boolean", driverDoc["attachRequired"]),
		column("PodInfoOnMount", "boolean", driverDoc["podInfoOnMount"]),
		column("StorageCapacity", "boolean", driverDoc["storageCapacity"]),
		column("TokenRequests", "string", driverDoc["tokenRequests"]),
		column("RequiresRepublish", "boolean", driverDoc["requiresRepublish"]),
		column("Modes", "string", driverDoc["volumeLifecycleModes"]),
		ageColumn(),
	}, func(d *storagev1.CSIDriver, now time.Time) []interface{} {
		// Unset fields print their API defaults.
		attach := true
		if d.Spec.AttachRequired != nil {
			attach = *d.Spec.AttachRequired
		}
		var modes, auds []string
		for _, m := range d.Spec.VolumeLifecycleModes {
			modes = append(modes, string(m))
		}
		for _, t := range d.Spec.TokenRequests {
			auds = append(auds, t.Audience)
		}
		return []interface{}{d.Name, attach, deref(d.Spec.PodInfoOnMount), deref(d.Spec.StorageCapacity), joinOr(auds, ",", "<unset>"),
			deref(d.Spec.RequiresRepublish), joinOr(modes, ",", "<none>"), age(d.ObjectMeta, now)}
	})

	capDoc := storagev1.CSIStorageCapacity{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("StorageClassName", "string", capDoc["storageClassName"]),
		column("Capacity", "string", capDoc["capacity"]),
	}, func(c *storagev1.CSIStorageCapacity, now time.Time) []interface{} {
		capacity := "<unset>"
		if c.Capacity != nil {
			capacity = c.Capacity.String()
		}
		// Upstream prints no Age for capacities.
		return []interface{}{c.Name, c.StorageClassName, capacity}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("DriverName", "string", storagev1.VolumeAttributesClass{}.SwaggerDoc()["driverName"]),
		ageColumn(),
	}, func(c *storagev1.VolumeAttributesClass, now time.Time) []interface{} {
		return []interface{}{c.Name, c.DriverName, age(c.ObjectMeta, now)}
	})
}
