# The 99 % run-time bound lent nodes are admitted by (issue 35).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0021_job_shrink_to"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="predicted_tail_s",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
