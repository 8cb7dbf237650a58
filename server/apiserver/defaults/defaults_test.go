package defaults_test

import (
	"math"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/defaults/defaultstest"

	"testing"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// seedDeployment is the container-lab Deployment from the project seed.
func seedDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab"}},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "container-lab"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(30)),
					Containers: []corev1.Container{{
						Name:  "app",
						Image: "username/container-lab:v2",
						Ports: []corev1.ContainerPort{{ContainerPort: 8000}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/healthz", Port: intstr.FromInt32(8000),
							}},
							PeriodSeconds: 2,
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("128Mi"),
							},
							Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
							Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}},
						}},
					}},
				},
			},
		},
	}
}

func TestSeedDeploymentDefaults(t *testing.T) {
	d := seedDeployment()
	defaultstest.Apply(d)

	// Client values survive.
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3 (client value kept)", *d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if *ru.MaxSurge != intstr.FromInt32(1) || *ru.MaxUnavailable != intstr.FromInt32(0) {
		t.Errorf("rollingUpdate = %v/%v, want 1/0", ru.MaxSurge, ru.MaxUnavailable)
	}
	rp := d.Spec.Template.Spec.Containers[0].ReadinessProbe
	if rp.PeriodSeconds != 2 {
		t.Errorf("periodSeconds = %d, want 2", rp.PeriodSeconds)
	}

	// Defaults filled.
	if *d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("revisionHistoryLimit/progressDeadlineSeconds = %d/%d", *d.Spec.RevisionHistoryLimit, *d.Spec.ProgressDeadlineSeconds)
	}
	ps := d.Spec.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyAlways || ps.DNSPolicy != corev1.DNSClusterFirst ||
		ps.SchedulerName != "default-scheduler" || ps.SecurityContext == nil {
		t.Errorf("pod spec defaults missing: %+v", ps)
	}
	// Pod-only defaults must NOT reach templates (they would change the
	// template hash of every existing Deployment upstream).
	if ps.EnableServiceLinks != nil || ps.Priority != nil {
		t.Errorf("pod-only defaults leaked into template: enableServiceLinks=%v priority=%v", ps.EnableServiceLinks, ps.Priority)
	}
	c := ps.Containers[0]
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy = %q, want IfNotPresent for a :v2 tag", c.ImagePullPolicy)
	}
	if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Errorf("termination message defaults = %q/%q", c.TerminationMessagePath, c.TerminationMessagePolicy)
	}
	if c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("port protocol = %q", c.Ports[0].Protocol)
	}
	if rp.TimeoutSeconds != 1 || rp.SuccessThreshold != 1 || rp.FailureThreshold != 3 || rp.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("probe defaults = %+v", rp)
	}
	// Requests are not copied from limits in templates.
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || c.Resources.Requests.Memory().String() != "128Mi" {
		t.Errorf("requests changed: %v", c.Resources.Requests)
	}

	// Idempotence.
	again := d.DeepCopy()
	defaultstest.Apply(again)
	if !apiequality.Semantic.DeepEqual(d, again) {
		t.Errorf("Apply is not idempotent")
	}
}

func TestEmptyDeploymentDefaults(t *testing.T) {
	d := &appsv1.Deployment{}
	defaultstest.Apply(d)
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxSurge.String() != "25%" || ru.MaxUnavailable.String() != "25%" {
		t.Errorf("strategy = %+v", d.Spec.Strategy)
	}
	// Recreate gets no rollingUpdate block.
	r := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
	defaultstest.Apply(r)
	if r.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("Recreate got rollingUpdate %+v", r.Spec.Strategy.RollingUpdate)
	}
}

func TestPodDefaults(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		Containers: []corev1.Container{{
			Name:  "c",
			Image: "nginx",
			Env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
			}}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("500m"),
				corev1.ResourceMemory: resource.MustParse("1Gi"),
			}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			Lifecycle:     &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
		}},
		Volumes: []corev1.Volume{
			{Name: "bare"},
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "hp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
			}}},
		},
	}}
	defaultstest.Apply(p)
	s := p.Spec
	if s.RestartPolicy != corev1.RestartPolicyAlways || s.DNSPolicy != corev1.DNSClusterFirst ||
		*s.TerminationGracePeriodSeconds != 30 || s.SchedulerName != corev1.DefaultSchedulerName ||
		s.SecurityContext == nil || !*s.EnableServiceLinks {
		t.Errorf("pod spec defaults: %+v", s)
	}
	if s.Priority != nil || s.PreemptionPolicy != nil {
		t.Errorf("priority = %v / %v: the Priority admission plugin's to set", s.Priority, s.PreemptionPolicy)
	}
	c := s.Containers[0]
	if c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("untagged image pull policy = %q, want Always", c.ImagePullPolicy)
	}
	if s.InitContainers[0].ImagePullPolicy != corev1.PullAlways || s.InitContainers[0].TerminationMessagePath == "" {
		t.Errorf("init container not defaulted: %+v", s.InitContainers[0])
	}
	if c.Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
		t.Errorf("fieldRef apiVersion = %q", c.Env[0].ValueFrom.FieldRef.APIVersion)
	}
	// Missing requests come from limits; explicit requests stay.
	if c.Resources.Requests.Memory().String() != "1Gi" || c.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("requests = %v", c.Resources.Requests)
	}
	if c.LivenessProbe.HTTPGet.Path != "/" || c.LivenessProbe.PeriodSeconds != 10 || c.Lifecycle.PostStart.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("probe/lifecycle defaults: %+v %+v", c.LivenessProbe, c.Lifecycle.PostStart.HTTPGet)
	}
	v := s.Volumes
	if v[0].EmptyDir == nil {
		t.Errorf("bare volume should become emptyDir: %+v", v[0])
	}
	if *v[1].Secret.DefaultMode != 0o644 || *v[2].ConfigMap.DefaultMode != 0o644 {
		t.Errorf("defaultMode not 0644")
	}
	if v[3].HostPath.Type == nil || *v[3].HostPath.Type != corev1.HostPathUnset {
		t.Errorf("hostPath type = %v", v[3].HostPath.Type)
	}
	if *v[4].Projected.DefaultMode != 0o644 || *v[4].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != 3600 {
		t.Errorf("projected defaults: %+v", v[4].Projected)
	}
}

func TestPodHostNetworkLeavesPriority(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		HostNetwork:       true,
		PriorityClassName: "system-node-critical",
		Containers:        []corev1.Container{{Name: "c", Image: "x:1", Ports: []corev1.ContainerPort{{ContainerPort: 9100}}}},
	}}
	defaultstest.Apply(p)
	if p.Spec.Containers[0].Ports[0].HostPort != 9100 {
		t.Errorf("hostPort = %d, want 9100", p.Spec.Containers[0].Ports[0].HostPort)
	}
	// Priority is the Priority admission plugin's, from the class.
	if p.Spec.Priority != nil || p.Spec.PreemptionPolicy != nil {
		t.Errorf("defaulting resolved the priority: %v %v", p.Spec.Priority, p.Spec.PreemptionPolicy)
	}
}

func TestSeedServiceDefaults(t *testing.T) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "container-lab"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8000)}},
		},
	}
	defaultstest.Apply(s)
	sp := s.Spec
	if sp.Type != corev1.ServiceTypeClusterIP || sp.SessionAffinity != corev1.ServiceAffinityNone {
		t.Errorf("type/affinity = %q/%q", sp.Type, sp.SessionAffinity)
	}
	if sp.Ports[0].Protocol != corev1.ProtocolTCP || sp.Ports[0].TargetPort != intstr.FromInt32(8000) {
		t.Errorf("port = %+v", sp.Ports[0])
	}
	if *sp.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster || sp.ExternalTrafficPolicy != "" {
		t.Errorf("traffic policies = %v/%q", *sp.InternalTrafficPolicy, sp.ExternalTrafficPolicy)
	}
	if *sp.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || len(sp.IPFamilies) != 1 || sp.IPFamilies[0] != corev1.IPv4Protocol {
		t.Errorf("ip families = %v/%v", *sp.IPFamilyPolicy, sp.IPFamilies)
	}
	// The allocator, not defaulting, picks the cluster IP.
	if sp.ClusterIP != "" || len(sp.ClusterIPs) != 0 {
		t.Errorf("clusterIP must stay unallocated: %q %v", sp.ClusterIP, sp.ClusterIPs)
	}
}

func TestServiceVariants(t *testing.T) {
	t.Run("targetPort from port", func(t *testing.T) {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
		defaultstest.Apply(s)
		if s.Spec.Ports[0].TargetPort != intstr.FromInt32(443) {
			t.Errorf("targetPort = %v", s.Spec.Ports[0].TargetPort)
		}
	})
	t.Run("load balancer", func(t *testing.T) {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP}}
		defaultstest.Apply(s)
		if s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || !*s.Spec.AllocateLoadBalancerNodePorts {
			t.Errorf("LB defaults: %+v", s.Spec)
		}
		if *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 {
			t.Errorf("client IP timeout = %d", *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)
		}
	})
	t.Run("external name", func(t *testing.T) {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
		defaultstest.Apply(s)
		if s.Spec.IPFamilyPolicy != nil || s.Spec.IPFamilies != nil || s.Spec.InternalTrafficPolicy != nil {
			t.Errorf("ExternalName got IP fields: %+v", s.Spec)
		}
	})
	t.Run("headless selectorless", func(t *testing.T) {
		s := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "None"}}
		defaultstest.Apply(s)
		if *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyRequireDualStack || s.Spec.ClusterIPs[0] != "None" {
			t.Errorf("headless: %+v", s.Spec)
		}
	})
	t.Run("clusterIP syncs clusterIPs", func(t *testing.T) {
		s := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "fd00::10"}}
		defaultstest.Apply(s)
		if len(s.Spec.ClusterIPs) != 1 || s.Spec.IPFamilies[0] != corev1.IPv6Protocol {
			t.Errorf("clusterIPs/families: %v %v", s.Spec.ClusterIPs, s.Spec.IPFamilies)
		}
	})
}

func TestWorkloadDefaults(t *testing.T) {
	t.Run("statefulset", func(t *testing.T) {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		}}
		defaultstest.Apply(s)
		sp := s.Spec
		if *sp.Replicas != 1 || sp.PodManagementPolicy != appsv1.OrderedReadyPodManagement ||
			sp.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
			*sp.UpdateStrategy.RollingUpdate.Partition != 0 || *sp.RevisionHistoryLimit != 10 ||
			sp.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
			sp.PersistentVolumeClaimRetentionPolicy.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
			t.Errorf("statefulset defaults: %+v", sp)
		}
		vct := sp.VolumeClaimTemplates[0]
		if *vct.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || vct.Status.Phase != corev1.ClaimPending {
			t.Errorf("volumeClaimTemplate defaults: %+v", vct)
		}
	})
	t.Run("daemonset", func(t *testing.T) {
		d := &appsv1.DaemonSet{}
		defaultstest.Apply(d)
		ru := d.Spec.UpdateStrategy.RollingUpdate
		if d.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType ||
			*ru.MaxUnavailable != intstr.FromInt32(1) || *ru.MaxSurge != intstr.FromInt32(0) || *d.Spec.RevisionHistoryLimit != 10 {
			t.Errorf("daemonset defaults: %+v", d.Spec)
		}
	})
	t.Run("replicaset", func(t *testing.T) {
		r := &appsv1.ReplicaSet{}
		defaultstest.Apply(r)
		if *r.Spec.Replicas != 1 || r.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
			t.Errorf("replicaset defaults: %+v", r.Spec)
		}
	})
	t.Run("replication controller", func(t *testing.T) {
		rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}},
		}}
		defaultstest.Apply(rc)
		if rc.Spec.Selector["a"] != "b" || rc.Labels["a"] != "b" || *rc.Spec.Replicas != 1 {
			t.Errorf("rc defaults: %+v", rc)
		}
	})
	t.Run("job", func(t *testing.T) {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "uid-1"}}
		defaultstest.Apply(j)
		sp := j.Spec
		if *sp.Completions != 1 || *sp.Parallelism != 1 || *sp.BackoffLimit != 6 ||
			*sp.CompletionMode != batchv1.NonIndexedCompletion || *sp.Suspend ||
			*sp.PodReplacementPolicy != batchv1.TerminatingOrFailed || *sp.ManualSelector {
			t.Errorf("job defaults: %+v", sp)
		}
		if sp.Selector.MatchLabels[batchv1.ControllerUidLabel] != "uid-1" ||
			sp.Template.Labels[batchv1.ControllerUidLabel] != "uid-1" || sp.Template.Labels[batchv1.JobNameLabel] != "pi" {
			t.Errorf("selector not generated: %+v / %v", sp.Selector, sp.Template.Labels)
		}
		if j.Labels[batchv1.JobNameLabel] != "pi" {
			t.Errorf("job labels not taken from template: %v", j.Labels)
		}
	})
	t.Run("job parallelism only", func(t *testing.T) {
		j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(3)), BackoffLimitPerIndex: ptr.To(int32(1)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
			}}}}}
		defaultstest.Apply(j)
		if j.Spec.Completions != nil || *j.Spec.BackoffLimit != math.MaxInt32 || *j.Spec.PodReplacementPolicy != batchv1.Failed ||
			j.Spec.PodFailurePolicy.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue || j.Spec.Selector != nil {
			t.Errorf("job defaults: %+v", j.Spec)
		}
	})
	t.Run("manual selector", func(t *testing.T) {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Spec: batchv1.JobSpec{ManualSelector: ptr.To(true)}}
		defaultstest.Apply(j)
		if j.Spec.Selector != nil {
			t.Errorf("manual selector must not be generated")
		}
	})
	t.Run("cronjob", func(t *testing.T) {
		c := &batchv1.CronJob{}
		defaultstest.Apply(c)
		sp := c.Spec
		if sp.ConcurrencyPolicy != batchv1.AllowConcurrent || *sp.Suspend || *sp.SuccessfulJobsHistoryLimit != 3 ||
			*sp.FailedJobsHistoryLimit != 1 || sp.JobTemplate.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
			t.Errorf("cronjob defaults: %+v", sp)
		}
		if sp.JobTemplate.Spec.BackoffLimit != nil {
			t.Errorf("job template spec must not get Job defaults")
		}
	})
}

func TestOtherDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	defaultstest.Apply(ns)
	// The "kubernetes" finalizer is added on create by the registry, not
	// by defaulting: a /finalize write that empties the list must stick.
	if len(ns.Spec.Finalizers) != 0 ||
		ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "team-a" {
		t.Errorf("namespace: %+v", ns)
	}

	sec := &corev1.Secret{}
	defaultstest.Apply(sec)
	if sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret type = %q", sec.Type)
	}

	pvc := &corev1.PersistentVolumeClaim{}
	defaultstest.Apply(pvc)
	if *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("pvc volumeMode")
	}
	pv := &corev1.PersistentVolume{}
	defaultstest.Apply(pv)
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("pv: %+v", pv.Spec)
	}

	eps := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}}}
	defaultstest.Apply(eps)
	if *eps.Ports[0].Protocol != corev1.ProtocolTCP || *eps.Ports[0].Name != "" {
		t.Errorf("endpointslice port: %+v", eps.Ports[0])
	}
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}}
	defaultstest.Apply(ep)
	if ep.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("endpoints protocol")
	}

	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
		Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}},
	}}
	defaultstest.Apply(np)
	if len(np.Spec.PolicyTypes) != 2 || *np.Spec.Egress[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("networkpolicy: %+v", np.Spec)
	}
	np2 := &networkingv1.NetworkPolicy{}
	defaultstest.Apply(np2)
	if len(np2.Spec.PolicyTypes) != 1 || np2.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("networkpolicy without egress: %v", np2.Spec.PolicyTypes)
	}

	sc := &storagev1.StorageClass{Provisioner: "x"}
	defaultstest.Apply(sc)
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("storageclass: %+v", sc)
	}

	rb := &rbacv1.RoleBinding{Subjects: []rbacv1.Subject{
		{Kind: "User", Name: "u"}, {Kind: "Group", Name: "g"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"},
	}}
	defaultstest.Apply(rb)
	if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.Subjects[0].APIGroup != rbacv1.GroupName ||
		rb.Subjects[1].APIGroup != rbacv1.GroupName || rb.Subjects[2].APIGroup != "" {
		t.Errorf("rolebinding: %+v", rb)
	}

	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer,
		Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Min:  corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}}}}
	defaultstest.Apply(lr)
	it := lr.Spec.Limits[0]
	if it.Default.Cpu().String() != "2" || it.DefaultRequest.Cpu().String() != "2" || it.DefaultRequest.Memory().String() != "64Mi" {
		t.Errorf("limitrange: %+v", it)
	}

	hpa := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{},
	}}
	defaultstest.Apply(hpa)
	if *hpa.Spec.MinReplicas != 1 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 ||
		hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != nil || *hpa.Spec.Behavior.ScaleUp.StabilizationWindowSeconds != 0 ||
		len(hpa.Spec.Behavior.ScaleUp.Policies) != 2 || len(hpa.Spec.Behavior.ScaleDown.Policies) != 1 {
		t.Errorf("hpa: %+v", hpa.Spec)
	}
}

func TestResourceRounding(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "x:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")}},
	}}}}
	defaultstest.Apply(p)
	if got := p.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "1m" {
		t.Errorf("cpu rounded to %q, want 1m", got)
	}
}

func TestListsAndUnknownTypes(t *testing.T) {
	list := &corev1.PodList{Items: []corev1.Pod{{}, {}}}
	defaultstest.Apply(list)
	for i, p := range list.Items {
		if p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
			t.Errorf("item %d not defaulted", i)
		}
	}
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "b"}}
	before := cm.DeepCopy()
	defaultstest.Apply(cm)
	if !apiequality.Semantic.DeepEqual(cm, before) {
		t.Errorf("ConfigMap changed")
	}
	var unknown runtime.Object = &metav1.Status{}
	defaultstest.Apply(unknown) // must not panic
}

func TestApplyUpdateCarriesAllocatedServiceValues(t *testing.T) {
	old := &corev1.Service{Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}},
	}}
	defaultstest.Apply(old)
	// The client re-sends its original manifest, which never named them.
	replacement := &corev1.Service{Spec: corev1.ServiceSpec{
		Type:  corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
	}}
	defaultstest.ApplyUpdate(replacement, old)
	if replacement.Spec.ClusterIP != "10.96.0.10" || replacement.Spec.ClusterIPs[0] != "10.96.0.10" ||
		replacement.Spec.Ports[0].NodePort != 30080 || replacement.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("allocated values not carried over: %+v", replacement.Spec)
	}
	// Switching to ExternalName drops the cluster IP instead.
	ext := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	defaultstest.ApplyUpdate(ext, old)
	if ext.Spec.ClusterIP != "" || ext.Spec.IPFamilies != nil {
		t.Errorf("ExternalName got cluster IP fields: %+v", ext.Spec)
	}
	// Other kinds: plain Apply.
	p := &corev1.Pod{}
	defaultstest.ApplyUpdate(p, &corev1.Pod{})
	if p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("ApplyUpdate did not default")
	}
}

// Apply must be idempotent: the server may default the same object more
// than once (decode, then update).
func TestIdempotence(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "x",
			Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
		seedDeployment(),
		&appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ReplicaSet{},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "u"}}, &batchv1.CronJob{},
		&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		&corev1.Secret{StringData: map[string]string{"a": "b"}},
		&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{},
		&networkingv1.NetworkPolicy{}, &storagev1.StorageClass{}, &rbacv1.ClusterRoleBinding{},
		&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}}},
	}
	for _, obj := range objs {
		defaultstest.Apply(obj)
		again := obj.DeepCopyObject()
		defaultstest.Apply(again)
		if !apiequality.Semantic.DeepEqual(obj, again) {
			t.Errorf("%T: second Apply changed the object", obj)
		}
	}
}

// A type change wipes what the new type cannot have, if the client left it
// as stored (upstream's dropTypeDependentFields); what it changed stays.
func TestDropTypeDependentServiceFields(t *testing.T) {
	stored := func() *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.43.0.7", ClusterIPs: []string{"10.43.0.7"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	}
	// NodePort → ExternalName, only the type changed.
	s, old := stored(), stored()
	s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	defaults.DropTypeDependentServiceFields(s, old)
	if s.Spec.ClusterIP != "" || s.Spec.ClusterIPs != nil || s.Spec.IPFamilies != nil || s.Spec.IPFamilyPolicy != nil ||
		s.Spec.Ports[0].NodePort != 0 || s.Spec.ExternalTrafficPolicy != "" || s.Spec.InternalTrafficPolicy != nil {
		t.Errorf("to ExternalName: %+v", s.Spec)
	}
	// NodePort → ClusterIP: the cluster IP stays, the node port goes.
	s, old = stored(), stored()
	s.Spec.Type = corev1.ServiceTypeClusterIP
	defaults.DropTypeDependentServiceFields(s, old)
	if s.Spec.ClusterIP != "10.43.0.7" || s.Spec.Ports[0].NodePort != 0 || s.Spec.ExternalTrafficPolicy != "" || s.Spec.InternalTrafficPolicy == nil {
		t.Errorf("to ClusterIP: %+v", s.Spec)
	}
	// A value the client changed is its own: validation will judge it.
	s, old = stored(), stored()
	s.Spec.Type, s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "10.43.0.8", []string{"10.43.0.8"}
	s.Spec.Ports[0].NodePort = 30081
	defaults.DropTypeDependentServiceFields(s, old)
	if s.Spec.ClusterIP != "10.43.0.8" || s.Spec.Ports[0].NodePort != 30081 {
		t.Errorf("changed values were wiped: %+v", s.Spec)
	}
}
