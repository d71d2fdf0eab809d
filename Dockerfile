# The API under waitress. Settings come from the environment at run time; nothing secret is baked in.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HOST=0.0.0.0 \
    PORT=8000

WORKDIR /srv/app
RUN useradd --system --home-dir /srv/app --shell /usr/sbin/nologin app

COPY pyproject.toml README.md wsgi.py ./
COPY app ./app
COPY migrations ./migrations
RUN pip install -e . && mkdir -p instance && chown app instance

USER app
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=10s --start-period=20s --retries=5 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=5)"
# Migrate, provision the administrator when ADMIN_EMAIL/ADMIN_PASSWORD are set, then serve.
CMD ["sh", "-c", "flask --app wsgi db upgrade && if [ -n \"$ADMIN_EMAIL\" ] && [ -n \"$ADMIN_PASSWORD\" ]; then flask --app wsgi provision-admin; fi && exec flask --app wsgi serve"]
