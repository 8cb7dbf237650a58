package registry

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// batch/v1.

func jobs() *Resource {
	return &Resource{
		GVR: gvr("batch", "v1", "jobs"), Kind: "Job", Singular: "job", Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &batchv1.Job{} }, NewList: func() runtime.Object { return &batchv1.JobList{} },
		Status: true, Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(o.(*batchv1.Job).Status.Succeeded))}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.Job),
			Validate:             validator(validation.Job),
			ValidateUpdate:       updateValidator(validation.JobUpdate),
			ValidateStatusUpdate: updateValidator(validation.JobStatusUpdate),
		},
	}
}

func cronJobs() *Resource {
	return &Resource{
		GVR: gvr("batch", "v1", "cronjobs"), Kind: "CronJob", Singular: "cronjob", ShortNames: []string{"cj"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &batchv1.CronJob{} }, NewList: func() runtime.Object { return &batchv1.CronJobList{} },
		Status: true,
		Strategy: Strategy{
			Default:              defaulter(defaults.CronJob),
			Validate:             validator(validation.CronJob),
			ValidateUpdate:       updateValidator(validation.CronJobUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}
