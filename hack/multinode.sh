#!/usr/bin/env bash
# A three-node control plane in Docker containers (make run NODES=3 or
# make run-multinode): each container is a kubeadm-shaped control-plane node
# (etcd member, kube-apiserver, kube-scheduler, our kube-controller-manager
# with cluster/manifests/kube-controller-manager.yaml's flags) from the node
# image (make image-node), plus kwok fake nodes on the host. It prints an
# admin kubeconfig and stays up until Ctrl-C, then removes the containers.
#
# Environment: NODES (3), KWOK_NODES (3), KCM=upstream (run upstream's binary
# in the same bed), NODE_IMAGE (kcmclone/control-plane-node:dev).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
args=(-root "${ROOT}" -nodes "${NODES:-3}" -kwok-nodes "${KWOK_NODES:-3}" -image "${NODE_IMAGE:-kcmclone/control-plane-node:dev}")
[[ "${KCM:-ours}" == upstream ]] && args+=(-upstream)
go build -o _output/bin/multinode ./test/e2e/faults/cmd/multinode
exec _output/bin/multinode "${args[@]}"
