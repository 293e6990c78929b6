"""The one way the controller and the node daemon talk to the apiserver:
plain JSON over pooled HTTP connections (`apiserver`), the resources and
their paths (`resources`), paged lists and watches (`listwatch`), whole-object
reads and writes (`objects`), and where the credentials come from
(`credentials`)."""
