"""The owner reference a controller sets on what it creates (a leaf module: the kinds'
definitions that resources.py imports use it too)."""


def controller_reference(api_version: str, kind: str, owner: dict) -> dict:
    """What ownership.controller_ref() and the garbage collector follow from a child to `owner`."""
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
