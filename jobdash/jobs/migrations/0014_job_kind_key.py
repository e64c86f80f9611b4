from django.db import migrations, models


def fill_kind_keys(apps, schema_editor):
    """Every stored job's kind is one an adapter knows: it was validated by it at submission."""
    from queueing import adapter_key

    Job = apps.get_model("jobs", "Job")
    pairs = Job.objects.values_list("api_version", "kind").distinct()
    for api_version, kind in pairs:
        Job.objects.filter(api_version=api_version, kind=kind).update(kind_key=adapter_key(api_version, kind))


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0013_partial_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="kind_key",
            field=models.CharField(default="", max_length=127),
            preserve_default=False,
        ),
        migrations.RunPython(fill_kind_keys, migrations.RunPython.noop),
    ]
