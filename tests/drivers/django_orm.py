"""Django 5 (ORM, migrations, transactions) over psycopg 3 against a
running server.

Django is the most used Python web framework, and its PostgreSQL backend
sends what few other clients do: every foreign key is created `DEFERRABLE
INITIALLY DEFERRED` by ALTER TABLE, every indexed varchar gets a second
`varchar_pattern_ops` index, `migrate` changes column types and NOT NULL
in place, `get_or_create` runs inside a savepoint, `bulk_update` sends
`CASE WHEN`, and a `transaction.atomic()` block that fails rolls back
through ROLLBACK TO SAVEPOINT or ROLLBACK. This script writes a small app
(customers, orders, tags; a check constraint, a composite index, a
many-to-many) into a temporary directory, runs `migrate` for it and for
Django's own apps (auth, admin, contenttypes, sessions), then uses the ORM.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Each check states
PostgreSQL 15's answer (scripts/ci/drivers-against-postgres.sh runs this
file against it); the script exits non-zero at the first difference.
"""
import datetime
import decimal
import os
import sys
import tempfile
import textwrap

from sqlalchemy_common import check

app_dir = tempfile.mkdtemp(prefix="eddy-django-")
os.makedirs(os.path.join(app_dir, "shop", "migrations"))
for f in ("shop/__init__.py", "shop/migrations/__init__.py"):
    open(os.path.join(app_dir, f), "w").close()
with open(os.path.join(app_dir, "shop", "models.py"), "w") as f:
    f.write(textwrap.dedent("""
        from django.db import models

        class Customer(models.Model):
            email = models.EmailField(unique=True)
            name = models.CharField(max_length=100, db_index=True)
            created = models.DateTimeField(auto_now_add=True)
            vip = models.BooleanField(default=False)

        class Tag(models.Model):
            label = models.SlugField(unique=True)

        class Order(models.Model):
            customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
            total = models.DecimalField(max_digits=10, decimal_places=2)
            placed = models.DateField()
            note = models.TextField(blank=True, default="")
            tags = models.ManyToManyField(Tag, blank=True)

            class Meta:
                indexes = [models.Index(fields=["placed", "total"])]
                constraints = [
                    models.CheckConstraint(condition=models.Q(total__gte=0), name="total_nonneg")
                ]
    """))
sys.path.insert(0, app_dir)

import django
from django.conf import settings

settings.configure(
    SECRET_KEY="eddy-driver-test",
    USE_TZ=True,
    TIME_ZONE="UTC",
    INSTALLED_APPS=[
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "django.contrib.sessions",
        "django.contrib.admin",
        "django.contrib.messages",
        "shop",
    ],
    MIDDLEWARE=[
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ],
    TEMPLATES=[{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": [
            "django.contrib.auth.context_processors.auth",
            "django.contrib.messages.context_processors.messages",
            "django.template.context_processors.request",
        ]},
    }],
    DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": "127.0.0.1",
        "PORT": os.environ["EDDY_PORT"],
        "NAME": os.environ.get("EDDY_DB", "eddy"),
        "USER": os.environ.get("EDDY_USER", "eddy"),
        "PASSWORD": os.environ.get("EDDY_PASSWORD", "secret"),
        "OPTIONS": {"sslmode": "disable"},
    }},
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    # fast hashing: the test is about the database
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
)
django.setup()

from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Sum

call_command("makemigrations", "shop", verbosity=0)
call_command("migrate", verbosity=0)

from django.contrib.auth.models import Group, Permission, User
from shop.models import Customer, Order, Tag

# migrate ran Django's own migrations: permissions were made for every model
check("permissions after migrate", Permission.objects.filter(codename="add_order").count(), 1)
from django.contrib.contenttypes.models import ContentType
check("content types of the app",
      sorted(ContentType.objects.filter(app_label="shop").values_list("model", flat=True)),
      ["customer", "order", "tag"])

# the deferred foreign keys Django created
with connection.cursor() as c:
    c.execute(
        "SELECT conname, condeferrable, condeferred FROM pg_constraint "
        "WHERE conrelid = 'shop_order'::regclass AND contype = 'f'"
    )
    rows = c.fetchall()
check("shop_order's foreign key", [(r[1], r[2]) for r in rows], [(True, True)])
with connection.cursor() as c:
    c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'shop_customer' ORDER BY indexname")
    names = [r[0] for r in c.fetchall()]
check("shop_customer's indexes (the _like ones use varchar_pattern_ops)",
      sum(1 for n in names if n.endswith("_like")), 2)

ann = Customer.objects.create(email="ann@example.com", name="Ann")
bob = Customer.objects.create(email="bob@example.com", name="Bob", vip=True)
check("ids", bob.id > ann.id, True)
check("auto_now_add is timezone-aware", Customer.objects.get(pk=ann.pk).created.tzinfo is not None, True)
red, blue = Tag.objects.create(label="red"), Tag.objects.create(label="blue")
o1 = Order.objects.create(customer=ann, total=decimal.Decimal("12.50"), placed=datetime.date(2024, 3, 1))
o2 = Order.objects.create(customer=ann, total=decimal.Decimal("7.25"), placed=datetime.date(2024, 5, 9))
o3 = Order.objects.create(customer=bob, total=decimal.Decimal("100.00"), placed=datetime.date(2023, 12, 31))
o1.tags.add(red, blue)
o3.tags.add(red)

check("decimal round trip", Order.objects.get(pk=o1.pk).total, decimal.Decimal("12.50"))
check("sum per customer",
      list(Customer.objects.annotate(spent=Sum("orders__total")).order_by("name").values_list("name", "spent")),
      [("Ann", decimal.Decimal("19.75")), ("Bob", decimal.Decimal("100.00"))])
check("count of m2m", list(Order.objects.annotate(n=Count("tags")).order_by("pk").values_list("n", flat=True)), [2, 0, 1])
check("filter through a join", Order.objects.filter(customer__email__startswith="bob").count(), 1)
check("icontains", Customer.objects.filter(name__icontains="AN").count(), 1)
check("year lookup", Order.objects.filter(placed__year=2024).count(), 2)
check("m2m filter", sorted(Order.objects.filter(tags__label="red").values_list("pk", flat=True)), sorted([o1.pk, o3.pk]))
check("select_related", Order.objects.select_related("customer").get(pk=o3.pk).customer.name, "Bob")
check("exists", Order.objects.filter(total__gt=99).exists(), True)

# correlated subqueries, EXISTS, CASE, window functions, date truncation
from django.db.models import Case, Exists, OuterRef, Q, Subquery, Value, When, Window
from django.db.models.functions import ExtractYear, RowNumber, TruncMonth

latest = Order.objects.filter(customer=OuterRef("pk")).order_by("-placed").values("total")[:1]
check("Subquery(OuterRef) latest order",
      list(Customer.objects.annotate(last=Subquery(latest)).order_by("pk").values_list("name", "last")),
      [("Ann", decimal.Decimal("7.25")), ("Bob", decimal.Decimal("100.00"))])
big = Order.objects.filter(customer=OuterRef("pk"), total__gt=50)
check("Exists", list(Customer.objects.annotate(b=Exists(big)).order_by("pk").values_list("b", flat=True)), [False, True])
check("Case/When", list(Order.objects.annotate(size=Case(When(total__gt=10, then=Value("big")), default=Value("small")))
                        .order_by("pk").values_list("size", flat=True)), ["big", "small", "big"])
check("Window(RowNumber)", list(Order.objects.annotate(rn=Window(RowNumber(), partition_by=[F("customer")], order_by=F("placed").asc()))
                                .order_by("pk").values_list("rn", flat=True)), [1, 2, 1])
check("TruncMonth", list(Order.objects.annotate(m=TruncMonth("placed")).values("m").annotate(n=Count("id")).order_by("m").values_list("m", "n")),
      [(datetime.date(2023, 12, 1), 1), (datetime.date(2024, 3, 1), 1), (datetime.date(2024, 5, 1), 1)])
check("ExtractYear", list(Order.objects.annotate(y=ExtractYear("placed")).order_by("pk").values_list("y", flat=True)), [2024, 2024, 2023])
check("Q(...) | Q(...) across a join", Order.objects.filter(Q(total__lt=10) | Q(customer__vip=True)).count(), 2)
check("union", Order.objects.filter(total__lt=10).union(Order.objects.filter(total__gt=50)).count(), 2)
check("prefetch_related", [len(o.tags.all()) for o in Order.objects.prefetch_related("tags").order_by("pk")], [2, 0, 1])
# iterator() reads through a server-side cursor (DECLARE ... WITH HOLD)
check("iterator", sorted(o.pk for o in Order.objects.all().iterator(chunk_size=1)), sorted([o1.pk, o2.pk, o3.pk]))
with transaction.atomic():
    locked = sorted(o.pk for o in Order.objects.select_for_update(skip_locked=True).filter(total__gt=1))
check("select_for_update(skip_locked)", locked, sorted([o1.pk, o2.pk, o3.pk]))
check("raw", sorted(o.pk for o in Order.objects.raw("SELECT * FROM shop_order WHERE total > %s", [5])), sorted([o1.pk, o2.pk, o3.pk]))

# UPDATE with F(), and bulk_update's CASE WHEN
Order.objects.filter(customer=ann).update(total=F("total") + 1)
check("F() update", sorted(Order.objects.filter(customer=ann).values_list("total", flat=True)),
      [decimal.Decimal("8.25"), decimal.Decimal("13.50")])
o1.note, o2.note = "first", "second"
Order.objects.bulk_update([o1, o2], ["note"])
check("bulk_update", list(Order.objects.order_by("pk").values_list("note", flat=True)), ["first", "second", ""])
Tag.objects.bulk_create([Tag(label="green"), Tag(label="gold")])
check("bulk_create", Tag.objects.count(), 4)
# bulk_create(update_conflicts): ON CONFLICT ("email") DO UPDATE, arbitrated
# by the unique index
Customer.objects.bulk_create(
    [Customer(email="ann@example.com", name="Ann B."), Customer(email="cid@example.com", name="Cid")],
    update_conflicts=True, unique_fields=["email"], update_fields=["name"])
check("bulk_create(update_conflicts)",
      list(Customer.objects.filter(email__in=["ann@example.com", "cid@example.com"])
           .order_by("email").values_list("email", "name")),
      [("ann@example.com", "Ann B."), ("cid@example.com", "Cid")])
Customer.objects.filter(email="cid@example.com").delete()
Customer.objects.filter(email="ann@example.com").update(name="Ann")

# unique and check constraints raise IntegrityError
try:
    with transaction.atomic():
        Customer.objects.create(email="ann@example.com", name="Ann again")
    check("duplicate email", "accepted", "IntegrityError")
except IntegrityError:
    pass
try:
    with transaction.atomic():
        Order.objects.create(customer=bob, total=decimal.Decimal("-1"), placed=datetime.date(2024, 1, 1))
    check("negative total", "accepted", "IntegrityError")
except IntegrityError:
    pass

# a failing atomic block rolls back; a failing nested one only itself
try:
    with transaction.atomic():
        Customer.objects.create(email="cy@example.com", name="Cy")
        raise RuntimeError("abort")
except RuntimeError:
    pass
check("rolled back", Customer.objects.filter(name="Cy").exists(), False)
with transaction.atomic():
    Customer.objects.create(email="di@example.com", name="Di")
    try:
        with transaction.atomic():
            Customer.objects.create(email="ed@example.com", name="Ed")
            raise RuntimeError("inner")
    except RuntimeError:
        pass
check("savepoint rolled back, outer kept", sorted(Customer.objects.filter(name__in=["Di", "Ed"]).values_list("name", flat=True)), ["Di"])

# get_or_create (a savepoint), update_or_create (SELECT ... FOR UPDATE)
c, created = Customer.objects.get_or_create(email="ann@example.com", defaults={"name": "x"})
check("get_or_create finds", (c.pk, created), (ann.pk, False))
c, created = Customer.objects.update_or_create(email="bob@example.com", defaults={"vip": False})
check("update_or_create updates", (c.pk, created, Customer.objects.get(pk=bob.pk).vip), (bob.pk, False, False))

# the deferred foreign key: an order for a missing customer fails at COMMIT
try:
    with transaction.atomic():
        Order.objects.create(customer_id=999999, total=1, placed=datetime.date(2024, 1, 1))
    check("order for a missing customer", "committed", "IntegrityError at commit")
except IntegrityError:
    pass
check("nothing kept", Order.objects.filter(customer_id=999999).exists(), False)
# and a child before its parent in one transaction is fine
with transaction.atomic():
    Order.objects.create(customer_id=424242, total=2, placed=datetime.date(2024, 1, 2))
    Customer.objects.create(id=424242, email="late@example.com", name="Late")
check("child before parent", Order.objects.filter(customer_id=424242).count(), 1)

# delete cascades (Django collects the rows itself)
ann.delete()
check("cascade", (Order.objects.filter(customer_id=ann.pk).count(), Order.tags.through.objects.filter(order_id=o1.pk).count()), (0, 0))

# Django's auth app
u = User.objects.create_user("zoe", "zoe@example.com", "pw")
g = Group.objects.create(name="staff")
u.groups.add(g)
g.permissions.add(Permission.objects.get(codename="add_order"))
check("permission through a group", User.objects.get(pk=u.pk).has_perm("shop.add_order"), True)
check("password check", User.objects.get(username="zoe").check_password("pw"), True)
print("django: ok")
