package server

import (
	"context"
	"encoding/json"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// controlPlaneLabel is the role `kubectl get nodes` shows for the server's
// own node.
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// labelControlPlaneNode gives the server's own node its control-plane
// role whenever it (re-)registers, as k3s's server does. The kubelet may
// not: NodeRestriction forbids a node to give itself a role label, which
// would let it attract workloads meant for control-plane nodes. It runs
// under the controller manager's identity, outside leader election: each
// server labels its own node.
func labelControlPlaneNode(ctx context.Context, client kubernetes.Interface, node string) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	}))
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{controlPlaneLabel: "true"}}})
	label := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name != node || n.Labels[controlPlaneLabel] == "true" {
			return
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			logrus.WithError(err).Warnf("labelling node %s %s", node, controlPlaneLabel)
		}
	}
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    label,
		UpdateFunc: func(_, obj any) { label(obj) },
	})
	factory.Start(ctx.Done())
}
