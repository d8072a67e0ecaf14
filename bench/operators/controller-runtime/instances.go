package main

// status.instances (postgres): each instance spec.replicas asks for, from its pod as it is (or its
// absence): a port of opkit's operators/database/src/controllers/database/instances.ts (instanceStatuses,
// notReadyReason, describeNotReady). The peer reads no instance reports, so no start results.

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

var messageLine = regexp.MustCompile(`(?m)^message=(.*)$`)

func lastMessage(c *corev1.ContainerStatus) string {
	if c == nil {
		return ""
	}
	m := ""
	if c.State.Terminated != nil && c.State.Terminated.Message != "" {
		m = c.State.Terminated.Message
	} else if c.LastTerminationState.Terminated != nil {
		m = c.LastTerminationState.Terminated.Message
	}
	if sub := messageLine.FindStringSubmatch(m); sub != nil {
		return strings.TrimSpace(sub[1])
	}
	return ""
}

func findStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func withRefusal(s, refused string) string {
	if refused != "" {
		return s + ": " + refused
	}
	return s
}

// notReadyReason: why a pod that is not Ready is not, from its status (a missing pod: PodMissing).
func notReadyReason(pod *corev1.Pod) (string, string) {
	const container, init = "postgres", "bootstrap"
	if pod == nil {
		return "PodMissing", "the pod does not exist"
	}
	name := pod.Name
	if pod.DeletionTimestamp != nil {
		return "Terminating", name + " is being deleted"
	}
	st := &pod.Status
	for _, c := range st.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			reason, msg := c.Reason, c.Message
			if reason == "" {
				reason = "Unschedulable"
			}
			if msg == "" {
				msg = "no node fits"
			}
			return reason, fmt.Sprintf("%s cannot be scheduled: %s", name, msg)
		}
	}
	if boot := findStatus(st.InitContainerStatuses, init); boot != nil &&
		(boot.State.Terminated == nil || boot.State.Terminated.ExitCode != 0) {
		if boot.State.Running != nil {
			return "Bootstrapping", name + ": instance.sh is preparing the data directory"
		}
		reason := "Bootstrapping"
		if boot.State.Waiting != nil && boot.State.Waiting.Reason != "" {
			reason = boot.State.Waiting.Reason
		}
		return reason, withRefusal(name+": the bootstrap init container has not completed", lastMessage(boot))
	}
	server := findStatus(st.ContainerStatuses, container)
	if server == nil {
		phase := string(st.Phase)
		if phase == "" {
			phase = "Pending"
		}
		return "Pending", fmt.Sprintf("%s is %s", name, phase)
	}
	if server.State.Waiting != nil {
		reason := server.State.Waiting.Reason
		if reason == "" {
			reason = "Waiting"
		}
		return reason, withRefusal(fmt.Sprintf("%s: the %s container is waiting", name, container), lastMessage(server))
	}
	if server.State.Running != nil && server.Started != nil && !*server.Started {
		return "Starting", name + ": the server is starting (startup probe)"
	}
	if server.State.Running != nil {
		return "ReadinessProbeFailing", name + ": its readiness probe (health.sh ready) fails: a replica not streaming from the primary " +
			"within the lag bound, or a primary not accepting writes (kubectl describe pod " + name + " shows why)"
	}
	return "NotReady", name + " is not Ready"
}

// instanceStatuses: `<sts>-0` .. `<sts>-(replicas-1)`, in ordinal order.
func instanceStatuses(sts string, replicas int32, primary string, pods []corev1.Pod) []InstanceStatus {
	out := make([]InstanceStatus, 0, replicas)
	for i := int32(0); i < replicas; i++ {
		name := fmt.Sprintf("%s-%d", sts, i)
		var pod *corev1.Pod
		for j := range pods {
			if pods[j].Name == name {
				pod = &pods[j]
				break
			}
		}
		ready := pod != nil && isPodReady(pod)
		role := "replica"
		if name == primary {
			role = "primary"
		}
		s := InstanceStatus{Name: name, Role: role, Ready: ready}
		if !ready {
			s.Reason, s.Message = notReadyReason(pod)
		}
		out = append(out, s)
	}
	return out
}

// describeNotReady: "pg-2 not ready (Unschedulable: ...)" for each instance that is not ready, or "".
func describeNotReady(instances []InstanceStatus) string {
	var down []string
	for _, i := range instances {
		if !i.Ready {
			down = append(down, fmt.Sprintf("%s not ready (%s: %s)", i.Name, i.Reason, i.Message))
		}
	}
	return strings.Join(down, "; ")
}

type instanceEvent struct{ typ, reason, note string }

// instanceEvents: a port of opkit's instanceEvents (instances.ts) without the start results (the peer
// reads no instance reports): InstanceNotReady when a ready instance stops being ready, InstanceReady
// when it is again.
func instanceEvents(prev, next []InstanceStatus, primary string) []instanceEvent {
	before := make(map[string]InstanceStatus, len(prev))
	for _, i := range prev {
		before[i.Name] = i
	}
	var out []instanceEvent
	for _, n := range next {
		p, ok := before[n.Name]
		if !ok {
			continue
		}
		if p.Ready && !n.Ready {
			out = append(out, instanceEvent{corev1.EventTypeWarning, "InstanceNotReady",
				fmt.Sprintf("%s (%s) is not ready: %s: %s", n.Name, n.Role, n.Reason, n.Message)})
		} else if !p.Ready && n.Ready {
			note := n.Name + " (primary) is ready"
			if n.Role == "replica" {
				note = fmt.Sprintf("%s (replica) is ready: streaming from the primary %s", n.Name, primary)
			}
			out = append(out, instanceEvent{corev1.EventTypeNormal, "InstanceReady", note})
		}
	}
	return out
}
