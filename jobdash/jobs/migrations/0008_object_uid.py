from django.db import migrations


class Migration(migrations.Migration):
    """Every job kind has an object in the cluster, not only TFJobs."""

    dependencies = [("jobs", "0007_fence_claims")]

    operations = [migrations.RenameField(model_name="job", old_name="tfjob_uid", new_name="object_uid")]
