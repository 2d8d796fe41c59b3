#!/bin/bash
# Run the trainer on every host of a TPU pod slice: one SPMD process per host.
gcloud compute tpus tpu-vm ssh my-tpu-pod --zone=us-central2-b --worker=all --command='python3 train_fsdpv2.py'
