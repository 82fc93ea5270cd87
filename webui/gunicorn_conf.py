"""gunicorn settings for the web UI - the one production command (docker-compose uses it too):

    gunicorn -c python:ddm.webui.gunicorn_conf 'ddm.webui.app:create_app()'

One worker process (its tailers and rooms live in memory; more processes would need sticky sessions)
with a pool of threads: Flask-SocketIO's threading mode serves each websocket on a thread of its own
(simple-websocket takes over gunicorn's socket), so DDM_UI_THREADS bounds the browsers served at once.

    DDM_UI_BIND      host:port to listen on (default 127.0.0.1:8000; 0.0.0.0:8000 in a container)
    DDM_UI_THREADS   threads = concurrent browsers + a few for plain requests (default 100)
"""

import os

bind = os.environ.get("DDM_UI_BIND", "127.0.0.1:8000")
workers = 1
worker_class = "gthread"
threads = int(os.environ.get("DDM_UI_THREADS", "100"))
timeout = 60  # the worker's heartbeat to the arbiter; long-lived websockets run on pool threads
graceful_timeout = 10
keepalive = 5
accesslog = None
errorlog = "-"
loglevel = os.environ.get("DDM_UI_LOG_LEVEL", "info")
# gunicorn >= 27: no control socket (the UI needs none, and two instances would share one path)
control_socket_disable = True
