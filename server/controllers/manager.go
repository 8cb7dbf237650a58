package controllers

import (
	"context"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// Toolkit is what a component's loops are built from: one clientset, one
// shared informer factory (so every loop shares the same watches), and an
// event recorder per loop name.
type Toolkit struct {
	Config   *rest.Config
	Client   kubernetes.Interface
	Informer informers.SharedInformerFactory
	Recorder func(source string) record.EventRecorder
}

// RunComponent runs one component (kube-controller-manager's loops, the
// scheduler) until ctx ends: start must begin its loops and return; the
// informers start after it.
//
// There is no leader election: a cluster has one server (its etcd is a
// single member that only that process opens), so there is nobody to
// elect, as k3s runs these components with --leader-elect=false on its
// single-node datastore. Upstream's election would renew a Lease in
// kube-system every RetryPeriod (2 s) for each component: 3,600 etcd
// writes an hour, nine tenths of an idle node's, for nothing.
func RunComponent(ctx context.Context, name string, cfg *rest.Config, start func(ctx context.Context, t *Toolkit) error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logrus.WithError(err).Errorf("%s: client", name)
		return
	}
	if err := runToolkit(ctx, name, cfg, client, start); err != nil {
		logrus.WithError(err).Errorf("%s: start", name)
	}
	<-ctx.Done()
}

func runToolkit(ctx context.Context, name string, cfg *rest.Config, client kubernetes.Interface, start func(context.Context, *Toolkit) error) error {
	// Events get their own client, as upstream components do, so that a
	// burst of events never takes throttling budget from real work.
	events, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	t := &Toolkit{
		Config:   cfg,
		Client:   client,
		Informer: informers.NewSharedInformerFactory(client, 0),
		Recorder: func(source string) record.EventRecorder {
			return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: source})
		},
	}
	if err := start(ctx, t); err != nil {
		return err
	}
	t.Informer.Start(ctx.Done())
	return nil
}
