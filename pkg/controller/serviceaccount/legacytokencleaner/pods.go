package legacytokencleaner

import v1 "k8s.io/api/core/v1"

// podSecretNames lists every Secret a pod refers to: image pull secrets,
// env and envFrom of all its containers (init and ephemeral included), and
// secret-bearing volumes. A token in any of these is in use.
func podSecretNames(pod *v1.Pod) []string {
	var names []string
	add := func(name string) {
		if name != "" {
			names = append(names, name)
		}
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		add(ref.Name)
	}

	containerRefs := func(envFrom []v1.EnvFromSource, env []v1.EnvVar) {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				add(e.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		containerRefs(pod.Spec.InitContainers[i].EnvFrom, pod.Spec.InitContainers[i].Env)
	}
	for i := range pod.Spec.Containers {
		containerRefs(pod.Spec.Containers[i].EnvFrom, pod.Spec.Containers[i].Env)
	}
	for i := range pod.Spec.EphemeralContainers {
		containerRefs(pod.Spec.EphemeralContainers[i].EnvFrom, pod.Spec.EphemeralContainers[i].Env)
	}

	localRef := func(ref *v1.LocalObjectReference) {
		if ref != nil {
			add(ref.Name)
		}
	}
	for i := range pod.Spec.Volumes {
		src := &pod.Spec.Volumes[i].VolumeSource
		switch {
		case src.Secret != nil:
			add(src.Secret.SecretName)
		case src.Projected != nil:
			for _, p := range src.Projected.Sources {
				if p.Secret != nil {
					add(p.Secret.Name)
				}
			}
		case src.AzureFile != nil:
			add(src.AzureFile.SecretName)
		case src.CephFS != nil:
			localRef(src.CephFS.SecretRef)
		case src.Cinder != nil:
			localRef(src.Cinder.SecretRef)
		case src.FlexVolume != nil:
			localRef(src.FlexVolume.SecretRef)
		case src.RBD != nil:
			localRef(src.RBD.SecretRef)
		case src.ScaleIO != nil:
			localRef(src.ScaleIO.SecretRef)
		case src.ISCSI != nil:
			localRef(src.ISCSI.SecretRef)
		case src.StorageOS != nil:
			localRef(src.StorageOS.SecretRef)
		case src.CSI != nil:
			localRef(src.CSI.NodePublishSecretRef)
		}
	}
	return names
}
