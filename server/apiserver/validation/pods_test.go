package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestPodCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		wants  []want
	}{
		{"valid seed pod", func(p *corev1.Pod) {}, nil},
		{"namespace may be left to the server", func(p *corev1.Pod) { p.Namespace = "" }, nil},
		{"name required", func(p *corev1.Pod) { p.Name = "" },
			[]want{{field.ErrorTypeRequired, "metadata.name", "name or generateName is required"}}},
		{"name must be a DNS subdomain", func(p *corev1.Pod) { p.Name = "Bad_Name" },
			[]want{{field.ErrorTypeInvalid, "metadata.name", "RFC 1123 subdomain"}}},
		{"namespace must be a DNS label", func(p *corev1.Pod) { p.Namespace = "a.b" },
			[]want{{field.ErrorTypeInvalid, "metadata.namespace", ""}}},
		{"bad label value", func(p *corev1.Pod) { p.Labels["app"] = "-x-" },
			[]want{{field.ErrorTypeInvalid, "metadata.labels", ""}}},
		{"bad finalizer", func(p *corev1.Pod) { p.Finalizers = []string{"not a name"} },
			[]want{{field.ErrorTypeInvalid, "metadata.finalizers", ""}}},
		{"annotations too large", func(p *corev1.Pod) { p.Annotations = map[string]string{"a": strings.Repeat("x", 256*1024)} },
			[]want{{field.ErrorTypeTooLong, "metadata.annotations", ""}}},
		{"owner reference needs uid", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"}}
		}, []want{{field.ErrorTypeRequired, "metadata.ownerReferences[0].uid", ""}}},
		// The Sysctls conformance spec: malformed names are refused, the
		// others (safe or not) are the kubelet's to decide.
		{"sysctl names", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
				{Name: "foo-", Value: "bar"}, {Name: "kernel.shmmax", Value: "1"}, {Name: "safe-and-unsafe", Value: "1"},
				{Name: "bar..", Value: "42"}, {Name: "net/ipv4/ip_local_port_range", Value: "1 2"}, {Name: "kernel.shmmax", Value: "2"}}}
		}, []want{{field.ErrorTypeInvalid, "spec.securityContext.sysctls[0].name", "must have at most 253 characters"},
			{field.ErrorTypeInvalid, "spec.securityContext.sysctls[3].name", ""},
			{field.ErrorTypeDuplicate, "spec.securityContext.sysctls[5].name", ""}}},
		{"net sysctl on the host network", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}}}
		}, []want{{field.ErrorTypeInvalid, "spec.securityContext.sysctls[0].name", "may not be specified when 'hostNetwork' is true"}}},
		{"containers required", func(p *corev1.Pod) { p.Spec.Containers = nil },
			[]want{{field.ErrorTypeRequired, "spec.containers", ""}}},
		{"container name required", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" },
			[]want{{field.ErrorTypeRequired, "spec.containers[0].name", ""}}},
		{"container name is a DNS label", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "App" },
			[]want{{field.ErrorTypeInvalid, "spec.containers[0].name", ""}}},
		{"duplicate container names", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "app", Image: "x:1"})
		}, []want{{field.ErrorTypeDuplicate, "spec.containers[1].name", ""}}},
		{"init and regular names share a namespace", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "app", Image: "x:1"}}
		}, []want{{field.ErrorTypeDuplicate, "spec.containers[0].name", ""}}},
		{"image required", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" },
			[]want{{field.ErrorTypeRequired, "spec.containers[0].image", ""}}},
		{"image whitespace", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" },
			[]want{{field.ErrorTypeInvalid, "spec.containers[0].image", "leading or trailing whitespace"}}},
		{"port out of range", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 },
			[]want{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].containerPort", "between 1 and 65535"}}},
		{"port required", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 },
			[]want{{field.ErrorTypeRequired, "spec.containers[0].ports[0].containerPort", ""}}},
		{"duplicate port names", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}, {Name: "http", ContainerPort: 81}}
		}, []want{{field.ErrorTypeDuplicate, "spec.containers[0].ports[1].name", ""}}},
		{"bad port name", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Name = "HTTP_PORT" },
			[]want{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].name", ""}}},
		{"bad protocol", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "HTTP" },
			[]want{{field.ErrorTypeNotSupported, "spec.containers[0].ports[0].protocol", ""}}},
		{"restartPolicy value", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			[]want{{field.ErrorTypeNotSupported, "spec.restartPolicy", ""}}},
		{"dnsPolicy value", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" },
			[]want{{field.ErrorTypeNotSupported, "spec.dnsPolicy", ""}}},
		{"dnsPolicy None needs dnsConfig", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone },
			[]want{{field.ErrorTypeRequired, "spec.dnsConfig", ""}}},
		{"request above limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi")
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].resources.requests", "must be less than or equal to memory limit of 256Mi"}}},
		{"negative quantity", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("-1")
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].resources.requests[cpu]", "must be greater than or equal to 0"}}},
		{"unknown standard resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["gpu"] = resource.MustParse("1")
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].resources.limits[gpu]", "must be a standard resource for containers"}}},
		{"extended resource must not be overcommitted", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		}, []want{{field.ErrorTypeRequired, "spec.containers[0].resources.limits", "non overcommitable"}}},
		{"volume names unique", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}
		}, []want{{field.ErrorTypeDuplicate, "spec.volumes[1].name", ""}}},
		{"volume with two sources", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/x"},
			}}}
		}, []want{{field.ErrorTypeForbidden, "spec.volumes[0].emptyDir", "may not specify more than 1 volume type"}}},
		{"volume with no source", func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "data"}} },
			[]want{{field.ErrorTypeRequired, "spec.volumes[0]", "must specify a volume type"}}},
		{"secret volume needs a name", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptr.To(int32(0o1000))}}}}
		}, []want{
			{field.ErrorTypeRequired, "spec.volumes[0].secret.secretName", ""},
			{field.ErrorTypeInvalid, "spec.volumes[0].secret.defaultMode", "0777"},
		}},
		{"mount of undeclared volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "missing", MountPath: "/data"}}
		}, []want{{field.ErrorTypeNotFound, "spec.containers[0].volumeMounts[0].name", ""}}},
		{"subPath escapes the volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/data", SubPath: "../etc"}}
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].volumeMounts[0].subPath", "must not contain '..'"}}},
		{"probe without handler", func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet = nil },
			[]want{{field.ErrorTypeRequired, "spec.containers[0].readinessProbe", "must specify a handler type"}}},
		{"probe with two handlers", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}
		}, []want{{field.ErrorTypeForbidden, "spec.containers[0].readinessProbe.tcpSocket", "may not specify more than 1 handler type"}}},
		{"liveness success threshold", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}},
				SuccessThreshold: 2, TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 3,
			}
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].livenessProbe.successThreshold", "must be 1"}}},
		{"negative probe period", func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.PeriodSeconds = -1 },
			[]want{{field.ErrorTypeInvalid, "spec.containers[0].readinessProbe.periodSeconds", ""}}},
		{"exec needs a command", func(p *corev1.Pod) { p.Spec.Containers[0].Lifecycle.PreStop.Exec.Command = nil },
			[]want{{field.ErrorTypeRequired, "spec.containers[0].lifecycle.preStop.exec.command", ""}}},
		{"env name required", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Value: "x"}} },
			[]want{{field.ErrorTypeRequired, "spec.containers[0].env[0].name", ""}}},
		{"env name with '='", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B"}} },
			[]want{{field.ErrorTypeInvalid, "spec.containers[0].env[0].name", ""}}},
		{"env value and valueFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "x", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
			}}}
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom", "may not be specified when `value` is not empty"}}},
		{"env fieldRef path", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.containers"},
			}}}
		}, []want{{field.ErrorTypeNotSupported, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", ""}}},
		{"env secretKeyRef key", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}},
			}}}
		}, []want{{field.ErrorTypeRequired, "spec.containers[0].env[0].valueFrom.secretKeyRef.key", ""}}},
		{"negative grace period", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(-5)) },
			[]want{{field.ErrorTypeInvalid, "spec.terminationGracePeriodSeconds", "must be greater than or equal to 0"}}},
		{"activeDeadlineSeconds positive", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(int64(0)) },
			[]want{{field.ErrorTypeInvalid, "spec.activeDeadlineSeconds", ""}}},
		{"nodeSelector labels", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"bad key!": "x"} },
			[]want{{field.ErrorTypeInvalid, "spec.nodeSelector", ""}}},
		{"toleration operator", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Maybe", Effect: corev1.TaintEffectNoSchedule}}
		}, []want{{field.ErrorTypeNotSupported, "spec.tolerations[0].operator", ""}}},
		{"toleration effect", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Sometimes"}}
		}, []want{{field.ErrorTypeNotSupported, "spec.tolerations[0].effect", ""}}},
		{"toleration empty key needs Exists", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}
		}, []want{{field.ErrorTypeInvalid, "spec.tolerations[0].operator", "operator must be Exists when `key` is empty"}}},
		{"toleration Exists with value", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		}, []want{{field.ErrorTypeInvalid, "spec.tolerations[0].operator", "value must be empty"}}},
		{"tolerationSeconds needs NoExecute", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To(int64(5))}}
		}, []want{{field.ErrorTypeInvalid, "spec.tolerations[0].effect", "NoExecute"}}},
		{"node affinity requirement", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn}},
				}}},
			}}
		}, []want{{field.ErrorTypeRequired, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values", ""}}},
		{"node affinity with no terms", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{},
			}}
		}, []want{{field.ErrorTypeRequired, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", ""}}},
		{"pod anti-affinity topologyKey", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}},
				}},
			}}
		}, []want{
			{field.ErrorTypeRequired, "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", ""},
			{field.ErrorTypeInvalid, "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator", ""},
		}},
		{"affinity weight", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}},
			}}
		}, []want{{field.ErrorTypeInvalid, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "1-100"}}},
		{"init container without restartPolicy cannot probe", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x:1",
				ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ReadinessProbe: p.Spec.Containers[0].ReadinessProbe}}
		}, []want{{field.ErrorTypeForbidden, "spec.initContainers[0].readinessProbe", "restartPolicy=Always"}}},
		{"ephemeral containers only via subresource", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox:1", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}}}
		}, []want{{field.ErrorTypeForbidden, "spec.ephemeralContainers", "cannot be set on create"}}},
		{"hostNetwork hostPort mismatch", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 9000
		}, []want{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].hostPort", "must match `containerPort`"}}},
		{"hostname is a DNS label", func(p *corev1.Pod) { p.Spec.Hostname = "a.b" },
			[]want{{field.ErrorTypeInvalid, "spec.hostname", ""}}},
		{"runAsUser range", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To(int64(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.securityContext.runAsUser", ""}}},
		{"topology spread", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, WhenUnsatisfiable: "Whenever"}}
		}, []want{
			{field.ErrorTypeInvalid, "spec.topologySpreadConstraints[0].maxSkew", ""},
			{field.ErrorTypeRequired, "spec.topologySpreadConstraints[0].topologyKey", ""},
			{field.ErrorTypeNotSupported, "spec.topologySpreadConstraints[0].whenUnsatisfiable", ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := defaulted(seedPod())
			tc.mutate(p)
			expectErrors(t, Validate(p), tc.wants)
		})
	}
}

func TestPodUpdate(t *testing.T) {
	const forbidden = "pod updates may not change fields other than"
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		wants  []want
	}{
		{"no change", func(p *corev1.Pod) {}, nil},
		{"labels may change", func(p *corev1.Pod) { p.Labels["tier"] = "web" }, nil},
		{"image may change", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "username/container-lab:v3" }, nil},
		{"tolerations may be added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}, nil},
		{"activeDeadlineSeconds may be set", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(int64(60)) }, nil},
		{"ports are immutable", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 9000 },
			[]want{{field.ErrorTypeForbidden, "spec", forbidden}}},
		{"grace period is immutable", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(5)) },
			[]want{{field.ErrorTypeForbidden, "spec", "spec.terminationGracePeriodSeconds"}}},
		{"containers may not be added", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "x:1",
				ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile})
		}, []want{{field.ErrorTypeForbidden, "spec.containers", "may not add or remove containers"}}},
		{"tolerations may not be removed", func(p *corev1.Pod) { p.Spec.Tolerations = nil },
			[]want{{field.ErrorTypeForbidden, "spec.tolerations", "existing toleration can not be modified"}}},
		{"name is immutable", func(p *corev1.Pod) { p.Name = "other" },
			[]want{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}}},
		{"uid is immutable", func(p *corev1.Pod) { p.UID = "another" },
			[]want{{field.ErrorTypeInvalid, "metadata.uid", "field is immutable"}}},
		{"namespace is immutable", func(p *corev1.Pod) { p.Namespace = "kube-system" },
			[]want{{field.ErrorTypeInvalid, "metadata.namespace", "field is immutable"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := stored(defaulted(seedPod()))
			old.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))}}
			p := old.DeepCopy()
			tc.mutate(p)
			expectErrors(t, ValidateUpdate(p, old), tc.wants)
		})
	}

	t.Run("activeDeadlineSeconds may only shrink", func(t *testing.T) {
		old := stored(defaulted(seedPod()))
		old.Spec.ActiveDeadlineSeconds = ptr.To(int64(60))
		p := old.DeepCopy()
		p.Spec.ActiveDeadlineSeconds = ptr.To(int64(120))
		expectErrors(t, ValidateUpdate(p, old), []want{{field.ErrorTypeInvalid, "spec.activeDeadlineSeconds", "must be less than or equal to previous value"}})
	})
	t.Run("unconditional update without resourceVersion", func(t *testing.T) {
		old := stored(defaulted(seedPod()))
		p := old.DeepCopy()
		p.ResourceVersion = ""
		expectErrors(t, ValidateUpdate(p, old), nil)
	})
}

func TestPodStatusUpdate(t *testing.T) {
	old := stored(defaulted(seedPod()))
	old.Spec.RestartPolicy = corev1.RestartPolicyNever
	old.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0},
	}}}
	ok := old.DeepCopy()
	ok.Status.Phase = corev1.PodSucceeded
	ok.Status.PodIP = "10.244.0.5"
	ok.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.5"}}
	expectErrors(t, ValidateStatusUpdate(ok, old), nil)

	revived := old.DeepCopy()
	revived.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	expectErrors(t, ValidateStatusUpdate(revived, old), []want{{field.ErrorTypeForbidden, "status.containerStatuses[0].state", "non-terminated"}})

	badIP := old.DeepCopy()
	badIP.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.999"}}
	expectErrors(t, ValidateStatusUpdate(badIP, old), []want{{field.ErrorTypeInvalid, "status.podIPs[0].ip", ""}})

	moved := old.DeepCopy()
	moved.Spec.NodeName = "node-b"
	expectErrors(t, ValidateStatusUpdate(moved, old), []want{{field.ErrorTypeForbidden, "status.nodeName", ""}})
}

func TestPodTemplateObject(t *testing.T) {
	pt := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tmpl"},
		Template:   corev1.PodTemplateSpec{Spec: seedPodSpec()},
	}
	defaulted(pt)
	expectErrors(t, Validate(pt), nil)
	pt.Template.Spec.Containers[0].Image = ""
	expectErrors(t, Validate(pt), []want{{field.ErrorTypeRequired, "template.spec.containers[0].image", ""}})
}
