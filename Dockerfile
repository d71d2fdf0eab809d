# The API under waitress. Settings come from the environment at run time; nothing secret is baked in.
#
# Two stages: `build` turns the checkout into a wheel and installs it (not editable) with its
# dependencies into a virtual environment; `runtime` gets only that environment, the WSGI entry
# point and the migrations, all owned by root and read-only to the service's user. The image runs
# with a read-only root filesystem: the service writes only to the instance folder
# (/opt/file-repository/var/app-instance, Flask's instance path for an installed package) and to
# TMPDIR, where waitress spools request bodies (mount a volume or a tmpfs on both).
FROM python:3.12.12-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md wsgi.py ./
COPY app ./app
# The environment gets no pip of its own: nothing in the runtime image installs packages.
RUN python -m venv --without-pip /opt/file-repository \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && pip --python /opt/file-repository/bin/python install --no-cache-dir \
        /wheels/file_repository-*.whl

FROM python:3.12.12-slim-bookworm AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/file-repository/bin:$PATH \
    TMPDIR=/var/spool/file-repository \
    HOST=0.0.0.0 \
    PORT=8000
RUN groupadd --system --gid 10001 files \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin files
COPY --from=build /opt/file-repository /opt/file-repository
WORKDIR /srv/app
COPY wsgi.py ./
COPY migrations ./migrations
RUN install -d -o 10001 -g 10001 -m 0700 \
        /opt/file-repository/var/app-instance /var/spool/file-repository

USER 10001:10001
EXPOSE 8000
VOLUME ["/opt/file-repository/var/app-instance", "/var/spool/file-repository"]
HEALTHCHECK --interval=10s --timeout=10s --start-period=20s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=5)"]
# Migrate, provision the administrator when ADMIN_EMAIL/ADMIN_PASSWORD are set, then serve from
# SERVER_PROCESSES processes (default: one per core of the container's CPU set; with a CPU quota
# such as `docker run --cpus 2`, set it to the quota).
# Half of the two stops the container with provision-admin's one line, as `make run` does.
CMD ["sh", "-c", "flask --app wsgi db upgrade --directory migrations && if [ -n \"$ADMIN_EMAIL$ADMIN_PASSWORD\" ]; then flask --app wsgi provision-admin; fi && exec flask --app wsgi serve"]
