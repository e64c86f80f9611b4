from django.http import JsonResponse


def healthz(request):
    """Liveness of a listener: answered without the database, so a database outage
    does not restart every web and webhook process at once."""
    return JsonResponse({"status": "ok"})
