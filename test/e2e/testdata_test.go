package e2e

// seedDeployment is the seed's container-lab Deployment with the demo
// image the project builds (kelp/demo answers on :8000 with its hostname).
const seedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: container-lab
spec:
  replicas: 3
  selector:
    matchLabels:
      app: container-lab
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        app: container-lab
    spec:
      terminationGracePeriodSeconds: 30
      containers:
        - name: app
          image: kelp/demo:v1
          imagePullPolicy: IfNotPresent
          ports:
            - containerPort: 8000
          readinessProbe:
            httpGet: { path: /healthz, port: 8000 }
            periodSeconds: 2
          resources:
            requests: { cpu: 100m, memory: 128Mi }
            limits: { memory: 256Mi }
          lifecycle:
            preStop:
              exec: { command: ["sleep", "5"] }
`
