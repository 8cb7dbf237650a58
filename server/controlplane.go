package server

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/controllers"
	"github.com/kelp-project/kelp/server/controllers/admissionpolicystatus"
	"github.com/kelp-project/kelp/server/controllers/apfconfig"
	"github.com/kelp-project/kelp/server/controllers/apiservice"
	"github.com/kelp-project/kelp/server/controllers/clusterroleaggregation"
	"github.com/kelp-project/kelp/server/controllers/crd"
	"github.com/kelp-project/kelp/server/controllers/cronjob"
	"github.com/kelp-project/kelp/server/controllers/daemonset"
	"github.com/kelp-project/kelp/server/controllers/deployment"
	"github.com/kelp-project/kelp/server/controllers/disruption"
	"github.com/kelp-project/kelp/server/controllers/endpoints"
	"github.com/kelp-project/kelp/server/controllers/endpointslicemirroring"
	"github.com/kelp-project/kelp/server/controllers/garbagecollector"
	"github.com/kelp-project/kelp/server/controllers/job"
	"github.com/kelp-project/kelp/server/controllers/namespace"
	"github.com/kelp-project/kelp/server/controllers/nodeipam"
	"github.com/kelp-project/kelp/server/controllers/nodelifecycle"
	"github.com/kelp-project/kelp/server/controllers/nodepassword"
	"github.com/kelp-project/kelp/server/controllers/persistentvolume"
	"github.com/kelp-project/kelp/server/controllers/podautoscaler"
	"github.com/kelp-project/kelp/server/controllers/podgc"
	"github.com/kelp-project/kelp/server/controllers/pvcprotection"
	"github.com/kelp-project/kelp/server/controllers/pvprotection"
	"github.com/kelp-project/kelp/server/controllers/replicaset"
	"github.com/kelp-project/kelp/server/controllers/replication"
	"github.com/kelp-project/kelp/server/controllers/resourcequota"
	"github.com/kelp-project/kelp/server/controllers/serviceaccount"
	"github.com/kelp-project/kelp/server/controllers/servicelb"
	"github.com/kelp-project/kelp/server/controllers/statefulset"
	"github.com/kelp-project/kelp/server/controllers/storageversionmigrator"
	"github.com/kelp-project/kelp/server/controllers/ttlafterfinished"
	"github.com/kelp-project/kelp/server/manifests"
	"github.com/kelp-project/kelp/server/pki"
	"github.com/kelp-project/kelp/server/scheduler"
)

// nodeCIDRMaskSize is the size of each node's pod CIDR, as k3s uses.
const nodeCIDRMaskSize = 24

// startControlLoops runs kube-controller-manager's loops and the scheduler
// as two components (without leader election: see RunComponent), each an
// API client with its own identity,
// talking to the API server over loopback HTTPS like any other client. The
// returned wait blocks until they have stopped. api's signer mints the
// legacy Secrets' tokens (see serviceaccount.Signer); the garbage
// collector's watches are served in process (apiServing.inProcess).
func startControlLoops(ctx context.Context, cfg Config, ca *pki.CA, fp *frontProxy, apiURL string, api *apiServing) (wait func(), err error) {
	kcm, err := ca.RESTConfig(apiURL, config.ControllerManagerUser, nil)
	if err != nil {
		return nil, err
	}
	sched, err := ca.RESTConfig(apiURL, config.SchedulerUser, nil)
	if err != nil {
		return nil, err
	}
	kcmInProcess, err := api.inProcess(kcm, ca)
	if err != nil {
		return nil, err
	}
	kcmClient, err := kubernetes.NewForConfig(kcm)
	if err != nil {
		return nil, err
	}
	labelControlPlaneNode(ctx, kcmClient, cfg.NodeName)
	var wg sync.WaitGroup
	run := func(name string, rc *rest.Config, start func(context.Context, *controllers.Toolkit) error) {
		if (name == "kube-scheduler" && cfg.DisableScheduler) || (name == "kube-controller-manager" && cfg.DisableControllers) {
			logrus.Infof("%s: disabled", name)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			controllers.RunComponent(ctx, name, rc, start)
		}()
	}
	run("kube-controller-manager", kcm, func(ctx context.Context, t *controllers.Toolkit) error {
		ipam, err := nodeipam.New(t.Client, t.Informer.Core().V1().Nodes(), t.Recorder("node-ipam-controller"), cfg.ClusterCIDR, nodeCIDRMaskSize)
		if err != nil {
			return err
		}
		go ipam.Run(ctx)
		go replicaset.New(t.Client, t.Informer, t.Recorder("replicaset-controller")).Run(ctx, 5)
		go replication.New(t.Client, t.Informer, t.Recorder("replication-controller")).Run(ctx, 5)
		go deployment.New(t.Client, t.Informer, t.Recorder("deployment-controller")).Run(ctx, 5)
		go daemonset.New(t.Client, t.Informer, t.Recorder("daemonset-controller")).Run(ctx, 2)
		go statefulset.New(t.Client, t.Informer, t.Recorder("statefulset-controller")).Run(ctx, 5)
		go job.New(t.Client, t.Informer, t.Recorder("job-controller")).Run(ctx, 5)
		go cronjob.New(t.Client, t.Informer, t.Recorder("cronjob-controller")).Run(ctx, 2)
		go ttlafterfinished.New(t.Client, t.Informer, t.Recorder("ttl-after-finished-controller")).Run(ctx, 5)
		go serviceaccount.New(t.Client, t.Informer).Run(ctx, 2)
		go serviceaccount.NewRootCAPublisher(t.Client, t.Informer, ca.CertPEM).Run(ctx, 2)
		go serviceaccount.NewTokensController(t.Client, t.Informer, api.signer, ca.CertPEM).Run(ctx, 2)
		ns, err := namespace.NewForConfig(t.Config, t.Client, t.Informer)
		if err != nil {
			return err
		}
		go ns.Run(ctx, 2)
		gc, err := garbagecollector.NewForConfig(t.Config, 0, kcmInProcess)
		if err != nil {
			return err
		}
		go gc.Run(ctx, 10)
		go endpoints.New(t.Client, t.Informer).Run(ctx, 5)
		go endpointslicemirroring.New(t.Client, t.Informer).Run(ctx, 5)
		lifecycle, err := nodelifecycle.New(t.Client, t.Informer, t.Recorder("node-controller"), cfg.NodeLifecycle)
		if err != nil {
			return err
		}
		go lifecycle.Run(ctx, 2)
		go servicelb.New(t.Client, t.Informer).Run(ctx, 1)
		go nodepassword.New(t.Client, t.Informer).Run(ctx, 1)
		go clusterroleaggregation.New(t.Client, t.Informer).Run(ctx, 1)
		go disruption.New(t.Client, t.Informer, t.Recorder("disruption-controller")).Run(ctx, 2)
		go podgc.New(t.Client, t.Informer, cfg.PodGC).Run(ctx)
		go persistentvolume.New(t.Client, t.Informer, t.Recorder("persistentvolume-controller")).Run(ctx)
		go pvcprotection.New(t.Client, t.Informer).Run(ctx, 1)
		go pvprotection.New(t.Client, t.Informer).Run(ctx, 1)
		meta, err := metadata.NewForConfig(t.Config)
		if err != nil {
			return err
		}
		rq, err := resourcequota.New(t.Client, meta, t.Informer)
		if err != nil {
			return err
		}
		go rq.Run(ctx, 5)
		go admissionpolicystatus.New(t.Client, t.Informer).Run(ctx, 1)
		hpa, err := podautoscaler.New(t.Config, t.Client, t.Informer, t.Recorder("horizontal-pod-autoscaler"), podautoscaler.SyncPeriod)
		if err != nil {
			return err
		}
		go hpa.Run(ctx, 5)
		svm, err := storageversionmigrator.NewForConfig(t.Config, t.Client, t.Informer)
		if err != nil {
			return err
		}
		go svm.Run(ctx)
		return nil
	})
	// The CRD controllers belong to the API server upstream
	// (apiextensions-apiserver), which runs them as its loopback user; so
	// does kelp, as system:apiserver in system:masters.
	apiext, err := ca.RESTConfig(apiURL, config.APIServerUser, []string{config.MastersGroup})
	if err != nil {
		return nil, err
	}
	crdInformers, err := crd.Informers(apiext)
	if err != nil {
		return nil, err
	}
	if err := crd.Run(ctx, apiext, crdInformers); err != nil {
		return nil, err
	}
	// So does API Priority and Fairness's config controller, kube-apiserver's own.
	if err := runAPFConfig(ctx, apiext); err != nil {
		return nil, err
	}
	// And the aggregator's APIService controllers (autoregister, CRD
	// registration, availability).
	if err := apiservice.Run(ctx, apiext, registry.GroupVersions(), crdInformers.Apiextensions().V1().CustomResourceDefinitions(), fp.certPEM, fp.keyPEM); err != nil {
		return nil, err
	}
	crdInformers.Start(ctx.Done())
	run("kube-scheduler", sched, func(ctx context.Context, t *controllers.Toolkit) error {
		go scheduler.New(t.Client, t.Informer, t.Recorder(scheduler.SchedulerName), cfg.SchedulerBackoff).Run(ctx)
		return nil
	})
	return wg.Wait, nil
}

// runAPFConfig starts the flowcontrol configuration's controller
// (apfconfig) on its own informers, as the API server's loopback user.
func runAPFConfig(ctx context.Context, rc *rest.Config) error {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	fc := factory.Flowcontrol().V1()
	c := apfconfig.New(client.FlowcontrolV1(), fc.FlowSchemas(), fc.PriorityLevelConfigurations())
	factory.Start(ctx.Done())
	go c.Run(ctx)
	return nil
}

// startManifests writes the packaged manifests into
// <data-dir>/server/manifests, applies the directory once and watches it
// (see package manifests); the returned wait blocks until the watch has
// stopped. Its client holds system:masters, as k3s's deploy controller:
// a manifest may carry any object, RBAC included.
func startManifests(ctx context.Context, cfg Config, serverDir string, ca *pki.CA, apiURL string) (wait func(), err error) {
	dir := filepath.Join(serverDir, "manifests")
	unknown, err := manifests.WritePackaged(dir, cfg.Disable, manifestVars(cfg))
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		logrus.Warnf("--disable %s: kelp packages no such manifest (it has: %s); ignored",
			strings.Join(unknown, ","), strings.Join(manifests.Packaged(), ", "))
	}
	rc, err := ca.RESTConfig(apiURL, config.DeployUser, []string{config.MastersGroup})
	if err != nil {
		return nil, err
	}
	return manifests.Start(ctx, rc, dir)
}

// manifestVars are the values of the packaged manifests' placeholders.
func manifestVars(cfg Config) map[string]string {
	return map[string]string{
		"CLUSTER_DNS":              cfg.ClusterDNS,
		"LOCAL_PATH_STORAGE_CLASS": config.LocalPathStorageClass,
		"LOCAL_PATH_PROVISIONER":   config.LocalPathProvisioner,
	}
}
