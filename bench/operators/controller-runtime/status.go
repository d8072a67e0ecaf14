package main

// The Database status computed from the real children: a port of opkit's
// operators/database/src/controllers/database/status.ts, so that both write the same status.

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type observed struct {
	statefulSet     *appsv1.StatefulSet
	pods            []corev1.Pod
	statefulSetName string
	secretName      string
	endpoints       *Endpoints
	selector        string
	failure         *failure
	// targetPrimary: the designated primary of an engine with a cluster record (postgres), else "".
	targetPrimary string
	// instances: status.instances (engines with a cluster record), nil otherwise.
	instances []InstanceStatus
}

type failure struct {
	reason  string
	message string
}

type phaseDecision struct {
	phase   string
	reason  string
	message string
}

func isPodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func hadRun(prev *DatabaseStatus) bool {
	switch prev.Phase {
	case "Running", "Updating", "Degraded":
		return true
	case "Failed", "Deleting":
		return prev.ReadyReplicas != nil && *prev.ReadyReplicas > 0
	}
	return false
}

func replicasOf(db *Database) int32 {
	if db.Spec.Replicas != nil {
		return *db.Spec.Replicas
	}
	return 1
}

// readyCount: an engine with a cluster record counts its instances' pods as they are now (the
// StatefulSet's readyReplicas lags), like opkit; otherwise the StatefulSet's.
func readyCount(o *observed) int32 {
	if o.instances != nil {
		n := int32(0)
		for _, i := range o.instances {
			if i.Ready {
				n++
			}
		}
		return n
	}
	if o.statefulSet == nil {
		return 0
	}
	return o.statefulSet.Status.ReadyReplicas
}

// decidePhase names the instances that are not ready, and why, unless Running, Failed or Deleting.
func decidePhase(db *Database, prev *DatabaseStatus, o *observed) phaseDecision {
	d := decideBasePhase(db, prev, o)
	if d.phase == "Running" || d.phase == "Failed" || d.phase == "Deleting" {
		return d
	}
	if down := describeNotReady(o.instances); down != "" {
		d.message += "; " + down
	}
	return d
}

func decideBasePhase(db *Database, prev *DatabaseStatus, o *observed) phaseDecision {
	want := replicasOf(db)
	sts := o.statefulSet
	if db.DeletionTimestamp != nil {
		return phaseDecision{"Deleting", "Deleting", "the Database is being deleted"}
	}
	if o.failure != nil {
		return phaseDecision{"Failed", o.failure.reason, o.failure.message}
	}
	ran := hadRun(prev)
	if sts == nil || sts.DeletionTimestamp != nil {
		if ran {
			return phaseDecision{"Updating", "StatefulSetMissing", "the StatefulSet is being recreated"}
		}
		return phaseDecision{"Pending", "Pending", "the StatefulSet does not exist yet"}
	}
	st := sts.Status
	ready := readyCount(o)
	synced := st.ObservedGeneration >= sts.Generation && st.ObservedGeneration > 0
	rolled := st.CurrentRevision != "" && st.CurrentRevision == st.UpdateRevision
	specReplicas := int32(1)
	if sts.Spec.Replicas != nil {
		specReplicas = *sts.Spec.Replicas
	}
	scaling := specReplicas != want || st.Replicas != want
	msg := fmt.Sprintf("%d/%d replicas ready", ready, want)
	if synced && rolled && !scaling && ready >= want && st.UpdatedReplicas >= want {
		return phaseDecision{"Running", "AllReplicasReady", msg}
	}
	if !ran {
		return phaseDecision{"Provisioning", "Provisioning", msg}
	}
	if scaling {
		return phaseDecision{"Updating", "Scaling", fmt.Sprintf("scaling from %d to %d replicas; %s", st.Replicas, want, msg)}
	}
	if !synced || !rolled {
		rev := st.UpdateRevision
		if rev == "" {
			rev = "(unknown)"
		}
		return phaseDecision{"Updating", "RollingUpdate",
			fmt.Sprintf("rolling out revision %s: %d/%d pods updated; %s", rev, st.UpdatedReplicas, want, msg)}
	}
	return phaseDecision{"Degraded", "ReplicasNotReady", msg}
}

func computeStatus(db *Database, o *observed) DatabaseStatus {
	prev := db.Status
	d := decidePhase(db, &prev, o)
	want := replicasOf(db)
	status := *prev.DeepCopyForStatus()
	status.Phase = d.phase
	var replicas int32
	if o.statefulSet != nil {
		replicas = o.statefulSet.Status.Replicas
	}
	ready := readyCount(o)
	status.Replicas = &replicas
	status.ReadyReplicas = &ready
	status.CurrentPrimary = ""
	for i := range o.pods {
		p := &o.pods[i]
		ord, ok := podOrdinal(o.statefulSetName, p.Name)
		isPrimary := ok && ord == 0
		if o.targetPrimary != "" {
			isPrimary = p.Name == o.targetPrimary
		}
		if isPrimary && isPodReady(p) {
			status.CurrentPrimary = p.Name
		}
	}
	// Like opkit's cluster record: the system identifier stays as recorded (the peer reads no reports).
	if o.targetPrimary != "" {
		status.TargetPrimary = o.targetPrimary
		status.ReplicationMode = "Asynchronous"
		if db.Spec.SynchronousReplicas != nil && *db.Spec.SynchronousReplicas > 0 {
			status.ReplicationMode = fmt.Sprintf("Synchronous (ANY %d)", *db.Spec.SynchronousReplicas)
		}
	}
	if o.instances != nil {
		status.Instances = o.instances
	}
	if o.endpoints != nil {
		status.Endpoints = o.endpoints
	}
	if o.secretName != "" {
		status.SecretName = o.secretName
	}
	if o.selector != "" {
		status.Selector = o.selector
	}
	gen := db.Generation
	status.ObservedGeneration = &gen

	readyStatus := metav1.ConditionFalse
	if d.phase == "Running" {
		readyStatus = metav1.ConditionTrue
	}
	readyC := metav1.Condition{Type: "Ready", Status: readyStatus, Reason: d.reason, Message: d.message}
	var progressing metav1.Condition
	switch d.phase {
	case "Provisioning", "Updating", "Pending":
		progressing = metav1.Condition{Type: "Progressing", Status: metav1.ConditionTrue, Reason: d.reason, Message: d.message}
	default:
		reason, message := d.reason, d.message
		if d.phase == "Running" {
			reason, message = "ReconcileComplete", fmt.Sprintf("%d of %d replicas ready on the latest revision", want, want)
		}
		progressing = metav1.Condition{Type: "Progressing", Status: metav1.ConditionFalse, Reason: reason, Message: message}
	}
	var degraded metav1.Condition
	if d.phase == "Failed" || d.phase == "Degraded" {
		degraded = metav1.Condition{Type: "Degraded", Status: metav1.ConditionTrue, Reason: d.reason, Message: d.message}
	} else {
		degraded = metav1.Condition{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", Message: "no problems found"}
	}
	for _, c := range []metav1.Condition{readyC, progressing, degraded} {
		c.ObservedGeneration = gen
		meta.SetStatusCondition(&status.Conditions, c)
	}
	return status
}

// DeepCopyForStatus copies the status (the previous one is carried forward, then recomputed).
func (in *DatabaseStatus) DeepCopyForStatus() *DatabaseStatus {
	out := new(DatabaseStatus)
	in.DeepCopyInto(out)
	return out
}
