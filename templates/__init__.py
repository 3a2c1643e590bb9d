"""The report templates (jinja2 and CSS), kept at the top of the repository and installed as the
package data of ``audit.templates``; the reporters load nothing else."""
