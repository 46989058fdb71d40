package signer

import (
	"errors"
	"reflect"
	"testing"

	"k8s.io/klog/v2"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

func TestSignersToStart(t *testing.T) {
	pair := func(c, k string) kcmconfig.CSRSigningConfiguration {
		return kcmconfig.CSRSigningConfiguration{CertFile: c, KeyFile: k}
	}
	all := func(c, k string) []SignerFiles {
		return []SignerFiles{
			{"csrsigning-kubelet-serving", "kubernetes.io/kubelet-serving", c, k},
			{"csrsigning-kubelet-client", "kubernetes.io/kube-apiserver-client-kubelet", c, k},
			{"csrsigning-kube-apiserver-client", "kubernetes.io/kube-apiserver-client", c, k},
			{"csrsigning-legacy-unknown", "kubernetes.io/legacy-unknown", c, k},
		}
	}
	cases := []struct {
		name    string
		cfg     kcmconfig.CSRSigningControllerConfiguration
		want    []SignerFiles
		wantErr error
	}{
		{name: "nothing configured"},
		{name: "only the default cert", cfg: kcmconfig.CSRSigningControllerConfiguration{ClusterSigningCertFile: "ca.crt"}},
		{name: "only the default key", cfg: kcmconfig.CSRSigningControllerConfiguration{ClusterSigningKeyFile: "ca.key"}},
		{
			name: "default pair signs for everyone",
			cfg:  kcmconfig.CSRSigningControllerConfiguration{ClusterSigningCertFile: "ca.crt", ClusterSigningKeyFile: "ca.key"},
			want: all("ca.crt", "ca.key"),
		},
		{
			name: "default pair and a specific file",
			cfg: kcmconfig.CSRSigningControllerConfiguration{ClusterSigningCertFile: "ca.crt", ClusterSigningKeyFile: "ca.key",
				LegacyUnknownSignerConfiguration: pair("", "legacy.key")},
			wantErr: ErrDefaultAndSpecificFiles,
		},
		{
			name: "specific files pick their signers only",
			cfg: kcmconfig.CSRSigningControllerConfiguration{
				KubeletClientSignerConfiguration:       pair("kc.crt", "kc.key"),
				KubeAPIServerClientSignerConfiguration: pair("ac.crt", "ac.key"),
			},
			want: []SignerFiles{
				{"csrsigning-kubelet-client", "kubernetes.io/kube-apiserver-client-kubelet", "kc.crt", "kc.key"},
				{"csrsigning-kube-apiserver-client", "kubernetes.io/kube-apiserver-client", "ac.crt", "ac.key"},
			},
		},
		{
			// The missing half fails later, when the controller loads its files.
			name: "half a specific pair still starts",
			cfg:  kcmconfig.CSRSigningControllerConfiguration{KubeletServingSignerConfiguration: pair("ks.crt", "")},
			want: []SignerFiles{{"csrsigning-kubelet-serving", "kubernetes.io/kubelet-serving", "ks.crt", ""}},
		},
		{
			// An incomplete default pair is ignored next to specific files.
			name: "half a default pair with specific files",
			cfg: kcmconfig.CSRSigningControllerConfiguration{ClusterSigningCertFile: "ca.crt",
				LegacyUnknownSignerConfiguration: pair("l.crt", "l.key")},
			want: []SignerFiles{{"csrsigning-legacy-unknown", "kubernetes.io/legacy-unknown", "l.crt", "l.key"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SignersToStart(klog.Background(), tc.cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if ErrDefaultAndSpecificFiles.Error() != "cannot specify default and per controller certs at the same time" {
		t.Errorf("message %q", ErrDefaultAndSpecificFiles)
	}
}
