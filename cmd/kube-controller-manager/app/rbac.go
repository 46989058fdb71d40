package app

import (
	"context"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/clusterroleaggregation"
)

func newClusterRoleAggregationController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("clusterrole-aggregation-controller")
	if err != nil {
		return nil, err
	}
	c := clusterroleaggregation.NewController(cc.InformerFactory.Rbac().V1().ClusterRoles(), client.RbacV1())
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}
