package util

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/dump"
)

// FindPort resolves a Service port's targetPort for a pod: a number is used
// as is, a name is looked up among the pod's container ports with the same
// protocol (then among sidecar init containers).
func FindPort(pod *v1.Pod, svcPort *v1.ServicePort) (int, error) {
	target := svcPort.TargetPort
	switch target.Type {
	case intstr.Int:
		return target.IntValue(), nil
	case intstr.String:
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == target.StrVal && p.Protocol == svcPort.Protocol {
					return int(p.ContainerPort), nil
				}
			}
		}
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == target.StrVal && p.Protocol == svcPort.Protocol {
					return int(p.ContainerPort), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no suitable port for manifest: %s", pod.UID)
}

// DeepHashString hashes any value (FNV-128a over its dump) to hex.
func DeepHashString(obj interface{}) string {
	h := fnv.New128a()
	fmt.Fprint(h, dump.ForHash(obj))
	return hex.EncodeToString(h.Sum(nil))
}
