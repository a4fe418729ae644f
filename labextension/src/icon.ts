import { LabIcon } from '@jupyterlab/ui-components';

// A step-trace-like bar chart; `jp-icon3` lets JupyterLab recolour it for light and dark themes.
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="3" y="13" width="4" height="8" rx="1"/>
    <rect x="10" y="4" width="4" height="17" rx="1"/>
    <rect x="17" y="9" width="4" height="12" rx="1"/>
    <rect x="2" y="21.5" width="20" height="1.5"/>
  </g>
</svg>`;

export const profilerIcon = new LabIcon({ name: 'nbprofiler:icon', svgstr: svg });
