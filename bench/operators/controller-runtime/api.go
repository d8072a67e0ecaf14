package main

// The Database API (myapp.example.com/v1), as kubebuilder would scaffold it, with the DeepCopy functions
// controller-gen would generate written by hand. The CRD itself comes from opkit's definition: the
// harness installs it, so both implementations serve exactly the same schema.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crscheme "sigs.k8s.io/controller-runtime/pkg/scheme"
)

var GroupVersion = schema.GroupVersion{Group: "myapp.example.com", Version: "v1"}

var SchemeBuilder = &crscheme.Builder{GroupVersion: GroupVersion}

func init() {
	SchemeBuilder.Register(&Database{}, &DatabaseList{})
}

type DatabaseSpec struct {
	Engine            string                       `json:"engine"`
	Version           string                       `json:"version"`
	Storage           resource.Quantity            `json:"storage"`
	Replicas          *int32                       `json:"replicas,omitempty"`
	DeletionPolicy    string                       `json:"deletionPolicy,omitempty"`
	StorageClassName  *string                      `json:"storageClassName,omitempty"`
	Resources         *corev1.ResourceRequirements `json:"resources,omitempty"`
	DatabaseName      string                       `json:"databaseName,omitempty"`
	Username          string                       `json:"username,omitempty"`
	Parameters        map[string]string            `json:"parameters,omitempty"`
	PodAnnotations    map[string]string            `json:"podAnnotations,omitempty"`
	PodLabels         map[string]string            `json:"podLabels,omitempty"`
	ServiceType       string                       `json:"serviceType,omitempty"`
	Image             string                       `json:"image,omitempty"`
	NodeSelector      map[string]string            `json:"nodeSelector,omitempty"`
	Tolerations       []corev1.Toleration          `json:"tolerations,omitempty"`
	PriorityClassName string                       `json:"priorityClassName,omitempty"`
	// SynchronousReplicas: postgres, replicas each commit waits for (status.replicationMode).
	SynchronousReplicas *int32 `json:"synchronousReplicas,omitempty"`
}

type Endpoints struct {
	ReadWrite string `json:"readWrite"`
	ReadOnly  string `json:"readOnly,omitempty"`
	Port      int32  `json:"port"`
}

type DatabaseStatus struct {
	Phase              string             `json:"phase,omitempty"`
	Replicas           *int32             `json:"replicas,omitempty"`
	ReadyReplicas      *int32             `json:"readyReplicas,omitempty"`
	CurrentPrimary     string             `json:"currentPrimary,omitempty"`
	TargetPrimary      string             `json:"targetPrimary,omitempty"`
	SystemIdentifier   string             `json:"systemIdentifier,omitempty"`
	Endpoints          *Endpoints         `json:"endpoints,omitempty"`
	SecretName         string             `json:"secretName,omitempty"`
	ObservedGeneration *int64             `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	Selector           string             `json:"selector,omitempty"`
	ReplicationMode    string             `json:"replicationMode,omitempty"`
	Instances          []InstanceStatus   `json:"instances,omitempty"`
}

// InstanceStatus: one instance of an engine with a cluster record (postgres), from its pod as it is.
type InstanceStatus struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Ready   bool   `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DatabaseSpec   `json:"spec,omitempty"`
	Status            DatabaseStatus `json:"status,omitempty"`
}

type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

// ---- DeepCopy (what controller-gen's zz_generated.deepcopy.go would contain)

func copyMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func (in *DatabaseSpec) DeepCopyInto(out *DatabaseSpec) {
	*out = *in
	out.Storage = in.Storage.DeepCopy()
	if in.Replicas != nil {
		v := *in.Replicas
		out.Replicas = &v
	}
	if in.StorageClassName != nil {
		v := *in.StorageClassName
		out.StorageClassName = &v
	}
	if in.Resources != nil {
		out.Resources = in.Resources.DeepCopy()
	}
	out.Parameters = copyMap(in.Parameters)
	out.PodAnnotations = copyMap(in.PodAnnotations)
	out.PodLabels = copyMap(in.PodLabels)
	out.NodeSelector = copyMap(in.NodeSelector)
	if in.SynchronousReplicas != nil {
		v := *in.SynchronousReplicas
		out.SynchronousReplicas = &v
	}
	if in.Tolerations != nil {
		out.Tolerations = make([]corev1.Toleration, len(in.Tolerations))
		for i := range in.Tolerations {
			in.Tolerations[i].DeepCopyInto(&out.Tolerations[i])
		}
	}
}

func (in *DatabaseStatus) DeepCopyInto(out *DatabaseStatus) {
	*out = *in
	if in.Replicas != nil {
		v := *in.Replicas
		out.Replicas = &v
	}
	if in.ReadyReplicas != nil {
		v := *in.ReadyReplicas
		out.ReadyReplicas = &v
	}
	if in.Endpoints != nil {
		v := *in.Endpoints
		out.Endpoints = &v
	}
	if in.ObservedGeneration != nil {
		v := *in.ObservedGeneration
		out.ObservedGeneration = &v
	}
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	if in.Instances != nil {
		out.Instances = make([]InstanceStatus, len(in.Instances))
		copy(out.Instances, in.Instances)
	}
}

func (in *Database) DeepCopyInto(out *Database) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *Database) DeepCopy() *Database {
	if in == nil {
		return nil
	}
	out := new(Database)
	in.DeepCopyInto(out)
	return out
}

func (in *Database) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *DatabaseList) DeepCopyInto(out *DatabaseList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Database, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

func (in *DatabaseList) DeepCopy() *DatabaseList {
	if in == nil {
		return nil
	}
	out := new(DatabaseList)
	in.DeepCopyInto(out)
	return out
}

func (in *DatabaseList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
