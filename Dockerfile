# weince: the pinned CUDA container of the artifact.
#   docker build --build-arg WEINCE_GIT_COMMIT=$(git rev-parse HEAD) -t weince:0.1.0 .
#   docker run --gpus all -v "$PWD/data:/work/data" -v "$PWD/results:/work/results" \
#       -v "$PWD/reports:/work/reports" weince:0.1.0            # runs the paper profile
#   apptainer build weince-0.1.0.sif docker-daemon://weince:0.1.0     # for clusters
# torch 2.14.1's Linux wheels are built against CUDA 13.0 (cu130): the base image matches.
# Host requirement: CUDA 13.x runs on an NVIDIA driver >= 580 on Linux (NVIDIA's CUDA
# compatibility guide, "Minor Version Compatibility", table "CUDA Toolkit 11.x, 12.x, and
# 13.x Driver Version Ranges": CUDA 13.x, minimum driver >= 580); `nvidia-smi` on a node
# prints its driver. The labels say so to `docker inspect` / `apptainer inspect`.
FROM nvidia/cuda:13.0.2-runtime-ubuntu24.04
LABEL org.weince.cuda="13.0" \
      org.weince.nvidia-driver-min="580"

ARG PYTHON_VERSION=3.11
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Python 3.11 (the version the artifact is pinned and tested with) from the deadsnakes PPA.
# Apt packages are not version-pinned: the PPA drops old builds; the image tag pins the OS.
# torch.compile needs a C compiler and Python's headers at run time: Triton builds each CUDA
# kernel's launcher with `gcc` against Python.h (without them the first compiled kernel fails
# with "Failed to find C compiler"), and Inductor's CPU kernels need g++: build-essential
# (gcc, g++, libc6-dev) and python3.11-dev.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends software-properties-common gpg-agent git \
        build-essential \
    && add-apt-repository -y ppa:deadsnakes/ppa \
    && apt-get update \
    && apt-get install -y --no-install-recommends "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" \
        "python${PYTHON_VERSION}-dev" \
    && rm -rf /var/lib/apt/lists/* \
    && "python${PYTHON_VERSION}" -m venv /opt/venv

WORKDIR /work
# dependencies first (cached layer), then the code
COPY pyproject.toml README.md ./
COPY requirements/pip.txt requirements/lock.txt ./requirements/
COPY src ./src
# every Python dependency is pinned exactly, with its SHA-256, by the lock file, installed in
# pip's hash-checking mode (pip first, at the lock's version); PyPI's Linux torch wheels are
# the CUDA 13.0 build. The project itself cannot be hash-checked: it is this build context,
# installed without dependencies and built by the lock's setuptools.
RUN pip install --require-hashes -r requirements/pip.txt \
    && pip install --require-hashes -r requirements/lock.txt \
    && pip install --no-deps --no-build-isolation .
COPY Snakefile ./
COPY config ./config
COPY workflow ./workflow
COPY profiles ./profiles

# What made a result: the image has no .git, so the commit it is built from comes in as a
# build argument (the `docker build` line at the top; without it results record `unknown`),
# is checked, kept as an ENV that every result's provenance reads
# (weince.utils.provenance.git_commit) and shown as a label.
ARG WEINCE_GIT_COMMIT=unknown
RUN echo "${WEINCE_GIT_COMMIT}" | grep -Eqx '[0-9a-f]{7,40}(\+dirty)?|unknown' \
    || { echo "WEINCE_GIT_COMMIT=${WEINCE_GIT_COMMIT} is not a git commit; build with" \
              "--build-arg WEINCE_GIT_COMMIT=\$(git rev-parse HEAD)" >&2; exit 1; }
ENV WEINCE_GIT_COMMIT=${WEINCE_GIT_COMMIT}
LABEL org.opencontainers.image.revision="${WEINCE_GIT_COMMIT}"

# Which image made a result: an image cannot hold its own registry digest, so it records a
# digest of its software (installed packages, Python, OS release) that every result's
# provenance reads (weince.utils.provenance.container_digest); WEINCE_IMAGE_DIGEST, passed
# at `docker run -e`, names the registry digest instead
RUN mkdir -p /etc/weince && { pip freeze --all; python --version; cat /etc/os-release; \
        echo "${WEINCE_GIT_COMMIT}"; } | sha256sum | sed 's/^\([0-9a-f]*\).*/sha256:\1/' \
        > /etc/weince/image-digest

# default: the paper profile on the GPUs of this machine
CMD ["snakemake", "--configfile", "config/paper.yaml", "--cores", "all", "--resources", "gpu=1"]
